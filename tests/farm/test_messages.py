"""What is sent for a user turn: inputs, parts and attachments."""

from __future__ import annotations

import base64
import copy
import os

import pytest

from farm.messages import content_text, user_messages

PNG = b"\x89PNG\r\n\x1a\nfake-image"
WAV = b"RIFF....WAVEfmt fake-audio"


@pytest.fixture
def suite(tmp_path):
    """A test file's folder with fixtures, and a secret next to it (outside)."""
    folder = tmp_path / "suite"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "fixtures" / "receipt.png").write_bytes(PNG)
    (folder / "fixtures" / "note.wav").write_bytes(WAV)
    (folder / "report.pdf").write_bytes(b"%PDF-1.4 fake")
    (tmp_path / "secret.txt").write_text("top secret")
    return folder


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_a_string_is_one_user_message():
    assert user_messages("Hi there", [], None) == [{"role": "user", "content": "Hi there"}]


def test_a_message_object_and_a_history_list():
    assert user_messages({"role": "user", "content": "Hi"}, None, None) == [{"role": "user", "content": "Hi"}]
    assert user_messages({"content": "no role"}, None, None) == [{"role": "user", "content": "no role"}]
    history = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        "Q2",
    ]
    out = user_messages(history, None, None)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[-1] == {"role": "user", "content": "Q2"}


def test_bad_inputs_are_value_errors():
    bad_inputs = [([], "empty list"), (None, "missing"), (42, "is a int"),
                  ([{"role": "user"}], r"input\[0\] has no content")]
    for bad, pattern in bad_inputs:
        with pytest.raises(ValueError, match=pattern):
            user_messages(bad, None, None)


def test_attachments_join_the_last_user_message(suite):
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "Here is my receipt"}]
    before = copy.deepcopy(history)
    out = user_messages(history, [{"type": "image", "source": "file://./fixtures/receipt.png"}], suite)
    assert history == before  # the case's input is not changed
    assert out[0]["content"] == "first"
    assert out[-1]["content"] == [
        {"type": "text", "text": "Here is my receipt"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
    ]


def test_file_audio_url_and_data_attachments(suite):
    data_url = f"data:image/png;base64,{b64(PNG)}"
    out = user_messages("see these", [
        {"type": "file", "source": "file://report.pdf"},
        "fixtures/note.wav",  # a plain string: type guessed from the name
        "https://example.com/cat.jpg",
        {"type": "image", "source": data_url, "detail": "low"},
    ], suite)
    parts = out[0]["content"]
    assert parts[0] == {"type": "text", "text": "see these"}
    assert parts[1] == {"type": "file", "file": {"filename": "report.pdf",
                                                 "file_data": f"data:application/pdf;base64,{b64(b'%PDF-1.4 fake')}"}}
    assert parts[2] == {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}
    assert parts[3] == {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}}
    assert parts[4] == {"type": "image_url", "image_url": {"url": data_url, "detail": "low"}}


def test_parts_inside_a_message_are_converted(suite):
    message = {"role": "user", "content": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": "file://./fixtures/receipt.png"},
        {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}},
    ]}
    parts = user_messages(message, None, suite)[0]["content"]
    assert parts[0] == {"type": "text", "text": "What is this?"}
    assert parts[1]["type"] == "image_url" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[2] == {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}  # native: as is


@pytest.mark.parametrize("source", [
    "file://../secret.txt",
    "file://./fixtures/../../secret.txt",
    "../secret.txt",
])
def test_attachments_may_not_escape_the_test_folder(suite, source):
    with pytest.raises(ValueError, match=r"attachment 1 \(.*secret\.txt\) lies outside the test file's folder"):
        user_messages("hi", [{"type": "file", "source": source}], suite)


def test_an_absolute_path_outside_and_a_symlink_out_are_rejected(suite):
    secret = suite.parent / "secret.txt"
    with pytest.raises(ValueError, match="lies outside"):
        user_messages("hi", [f"file://{secret}"], suite)
    link = suite / "innocent.txt"
    os.symlink(secret, link)
    with pytest.raises(ValueError, match=r"attachment 2 \(file://innocent.txt\) lies outside"):
        user_messages("hi", ["file://fixtures/receipt.png", "file://innocent.txt"], suite)


def test_missing_and_unsendable_attachments_name_the_attachment(suite):
    with pytest.raises(ValueError, match=r"attachment 1 \(file://./nope.png\) does not exist"):
        user_messages("hi", ["file://./nope.png"], suite)
    with pytest.raises(ValueError, match=r"attachment 1 .* can only be sent for an image"):
        user_messages("hi", [{"type": "audio", "source": "https://example.com/a.mp3"}], suite)
    with pytest.raises(ValueError, match="not a base64 data URL"):
        user_messages("hi", ["data:text/plain,hello"], suite)
    with pytest.raises(ValueError, match="has type 'video'"):
        user_messages("hi", [{"type": "video", "source": "file://report.pdf"}], suite)
    with pytest.raises(ValueError, match="has no source"):
        user_messages("hi", [{"type": "image"}], suite)


def test_attachments_without_a_user_message_get_one(suite):
    out = user_messages([{"role": "system", "content": "sys"}], ["file://fixtures/receipt.png"], suite)
    assert out[-1]["role"] == "user"
    assert out[-1]["content"][0]["type"] == "image_url"


def test_content_text_joins_the_text_parts_and_says_what_becomes_of_the_others():
    content = ["a", {"type": "text", "text": "b"}, {"type": "image_url", "image_url": {"url": "https://x"}}]
    assert content_text(content) == "a\nb"
    assert content_text(content, separator=" ", others="mark") == "a b [image_url]"
    assert content_text(content, others="json") == '["a", {"type": "text", "text": "b"}, {"type": "image_url", "image_url": {"url": "https://x"}}]'
    assert content_text(content[:2], others="json") == "a\nb"


def test_content_text_of_no_content_a_string_and_other_json():
    assert content_text(None) == ""
    assert content_text("héllo") == "héllo"
    assert content_text({"n": "é"}) == '{"n": "é"}'
