"""What is sent for one user turn: a case's ``input`` and ``attachments`` as OpenAI messages.

``input`` (docs/reference/cases.md) is a string, one message ``{role, content}`` whose content
is a string or a list of parts, or a list of messages (history sent before the
agent answers). Parts and attachments of type ``image``, ``file`` and
``audio`` become OpenAI content parts:

=========  ==========================================================================
image      ``{"type": "image_url", "image_url": {"url": <https URL or data URL>}}``
file       ``{"type": "file", "file": {"filename": ..., "file_data": <data URL>}}``
audio      ``{"type": "input_audio", "input_audio": {"data": <base64>, "format": ...}}``
=========  ==========================================================================

An attachment is ``{"type", "source"}`` or a plain source string (its type then
guessed from the file name). Sources: ``file://./receipt.jpg`` (or a bare
relative path), resolved against the test file's folder and never outside it;
``https://...`` (images only: files and audio must travel as data); or a
``data:`` URL. OpenAI-native parts (``text``, ``image_url``, ``input_audio``,
``file`` with a ``file`` object) pass through unchanged.

Every problem is a :class:`ValueError` whose message is one sentence naming the
attachment.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import mimetypes
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from farm.excerpts import DOTS, clip
from farm.wording import nearest, shown

__all__ = ["MAX_ATTACHMENT_BYTES", "attachment_part", "content_text", "user_messages"]

MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024
"""Largest file sent as an attachment (OpenAI accepts up to 32 MB of files per request)."""

_OUR_TYPES = ("image", "file", "audio")

_AUDIO_FORMATS = {"mpeg": "mp3", "mp3": "mp3", "x-wav": "wav", "wave": "wav", "wav": "wav"}


def user_messages(
    input: Any, attachments: list[Any] | None = None, base_dir: Path | None = None
) -> list[dict[str, Any]]:
    """The messages that carry one user turn, attachments appended to the newest user message.

    ``base_dir``: the test file's folder, which ``file://`` sources may not
    leave (default: the current directory).
    """
    if isinstance(input, str):
        messages = [{"role": "user", "content": input}]
    elif isinstance(input, dict):
        messages = [_message(input, "input", base_dir)]
    elif isinstance(input, list):
        if not input:
            raise ValueError("input is an empty list; give a string, a message or a list of messages")
        messages = [
            {"role": "user", "content": item} if isinstance(item, str) else _message(item, f"input[{i}]", base_dir)
            for i, item in enumerate(input)
        ]
    elif input is None:
        raise ValueError("input is missing; give a string, a message or a list of messages")
    else:
        raise ValueError(f"input is a {type(input).__name__}; give a string, a message or a list of messages")
    if attachments:
        parts = [attachment_part(a, base_dir, f"attachment {i + 1}") for i, a in enumerate(attachments)]
        _append_parts(messages, parts)
    return messages


def content_text(content: Any, *, separator: str = "\n", others: Literal["skip", "mark", "json"] = "skip") -> str:
    """A message's content as text: a string as is, a list of parts as their texts joined by ``separator``.

    A text part is a string or an object with a string ``text``. ``others``
    says what becomes of any other part (an image, a file): ``"skip"`` leaves
    it out, ``"mark"`` shows it as ``[its type]``, and ``"json"`` writes the
    whole content as JSON text instead. ``None`` is the empty text; content
    that is neither a string nor a list is JSON text.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif others == "json":
            return json.dumps(content, ensure_ascii=False)
        elif others == "mark":
            texts.append(f"[{part.get('type')}]" if isinstance(part, dict) else str(part))
    return separator.join(texts)


ROLES = ("user", "assistant", "system", "developer", "tool")
"""The roles a message of a case's input may have (OpenAI's chat roles)."""

MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
"""The keys a message of a case's input may have."""


def _message(value: Any, where: str, base_dir: Path | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where} is a {type(value).__name__}; a message is an object {{role, content}}")
    for key in value:
        if key not in MESSAGE_KEYS:
            raise ValueError(f"{where} has an unknown key '{shown(str(key))}'{nearest(str(key), MESSAGE_KEYS)}; a message is an object {{role, content}}")
    role = value.get("role", "user")
    if role not in ROLES:
        raise ValueError(f"{where} has the role {json.dumps(role, ensure_ascii=False)}{nearest(str(role), ROLES)}; a role is one of {', '.join(ROLES)}")
    if "content" not in value and "tool_calls" not in value:
        raise ValueError(f"{where} has no content; a message is an object {{role, content}}")
    message = copy.deepcopy(value)
    message.setdefault("role", "user")
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [_part(p, base_dir, f"{where} part {j + 1}") for j, p in enumerate(content)]
    elif content is not None and not isinstance(content, str):
        raise ValueError(f"{where} content is a {type(content).__name__}; give a string or a list of parts")
    return message


def _part(part: Any, base_dir: Path | None, where: str) -> dict[str, Any]:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, dict):
        raise ValueError(f"{where} is a {type(part).__name__}; a part is an object with a type")
    if part.get("type") in _OUR_TYPES and not isinstance(part.get("file"), dict):
        return attachment_part(part, base_dir, where)
    return part


def _append_parts(messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> None:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = ([{"type": "text", "text": content}] if content else []) + parts
            elif isinstance(content, list):
                content.extend(parts)
            else:
                message["content"] = parts
            return
    messages.append({"role": "user", "content": parts})


# -- one attachment ------------------------------------------------------------


def attachment_part(attachment: Any, base_dir: Path | None, name: str = "attachment") -> dict[str, Any]:
    """One attachment (or non-text part) as an OpenAI content part."""
    if isinstance(attachment, str):
        spec: dict[str, Any] = {"source": attachment}
    elif isinstance(attachment, dict):
        spec = attachment
    else:
        raise ValueError(f"{name} is a {type(attachment).__name__}; give a source string or {{type, source}}")
    source = spec.get("source") or spec.get("url") or spec.get("path")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{name} has no source; give \"source\": \"file://...\", an https URL or a data URL")
    source = source.strip()
    label = f"{name} ({clip(source, 60, DOTS)})"
    kind = spec.get("type")
    if kind is not None and kind not in _OUR_TYPES:
        raise ValueError(f"{label} has type {kind!r}; use image, file or audio")

    if source.startswith(("http://", "https://")):
        kind = kind or _kind_of(_guess_mime(source))
        if kind != "image":
            raise ValueError(
                f"{label} is a URL, which can only be sent for an image; put the {kind} beside the test file"
            )
        part: dict[str, Any] = {"type": "image_url", "image_url": {"url": source}}
        if spec.get("detail"):
            part["image_url"]["detail"] = spec["detail"]
        return part

    if source.startswith("data:"):
        mime, data = _parse_data_url(source, label)
        filename = spec.get("filename") or "attachment" + (mimetypes.guess_extension(mime) or "")
    else:
        path = _resolve(source, base_dir, label)
        mime = spec.get("mime_type") or _guess_mime(path.name)
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        filename = spec.get("filename") or path.name
    kind = kind or _kind_of(mime)

    if kind == "image":
        part = {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}
        if spec.get("detail"):
            part["image_url"]["detail"] = spec["detail"]
        return part
    if kind == "audio":
        audio_format = spec.get("format") or _AUDIO_FORMATS.get(mime.split("/")[-1].lower())
        if not audio_format:
            raise ValueError(f"{label} has audio type {mime!r}; give \"format\" (wav or mp3)")
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    return {"type": "file", "file": {"filename": filename, "file_data": f"data:{mime};base64,{data}"}}


def _guess_mime(name: str) -> str:
    return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _kind_of(mime: str) -> str:
    major = mime.split("/")[0]
    return major if major in ("image", "audio") else "file"


def _parse_data_url(source: str, label: str) -> tuple[str, str]:
    header, comma, payload = source[5:].partition(",")
    if not comma or not header.endswith(";base64"):
        raise ValueError(f"{label} is not a base64 data URL (data:<mime>;base64,<data>)")
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{label} holds data that is not valid base64") from None
    mime = header[: -len(";base64")] or "application/octet-stream"
    return mime, payload


def _resolve(source: str, base_dir: Path | None, label: str) -> Path:
    raw = unquote(source[len("file://"):]) if source.startswith("file://") else source
    if "://" in raw or not raw:
        raise ValueError(f"{label} is not a file:// path, an https URL or a data URL")
    base = (base_dir if base_dir is not None else Path.cwd()).resolve()
    path = (base / raw).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"{label} lies outside the test file's folder {base}, which attachments may not leave")
    if not path.is_file():
        raise ValueError(f"{label} does not exist as a file in {base}")
    size = path.stat().st_size
    if size > MAX_ATTACHMENT_BYTES:
        mib = 1024 * 1024
        raise ValueError(
            f"{label} is {size // mib} MB, more than the {MAX_ATTACHMENT_BYTES // mib} MB an attachment may be"
        )
    return path
