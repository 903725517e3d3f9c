"""The scrubber: secrets masked whole, encoded and in pieces; configs and error messages without them."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import quote, quote_plus

from farm.agents.base import AgentHTTPError
from farm.agents.openai import OpenAIAgent
from farm.config import AgentConfig, Connector, FarmConfig
from farm.demo.server import JSONServer, Response
from farm.results import CaseResult, TurnResult
from farm.secrets import MIN_PIECE, Scrubber, header_secrets, process_scrubber, redact_url, scrub_result
from farm.writers import MultiWriter

KEY = "sk-proj-Zx81Yw72Vu63Ts54Rq45Po36"


def pieces(secret: str) -> list[str]:
    return [secret[i : i + MIN_PIECE] for i in range(len(secret) - MIN_PIECE + 1)]


def clean(text: str, secret: str = KEY) -> bool:
    return not any(p in text for p in pieces(secret))


def test_whole_cut_and_encoded_forms_are_masked():
    scrubber = Scrubber([KEY])
    raw = KEY.encode()
    echoes = [
        KEY,
        f"a{KEY[:13]}b and c{KEY[13:]}d",
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(b"\xfb" + raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
        base64.b64encode(b"Bearer " + raw).decode(),
        quote(KEY + "/", safe=""),
        quote_plus("k=" + KEY),
    ]
    for echo in echoes:
        out = scrubber.scrub(f"before {echo} after")
        assert out.startswith("before ") and out.endswith(" after")
        assert "***" in out, echo
        assert clean(out), (echo, out)
        for form in (base64.b64encode(raw).decode().rstrip("="),):
            assert clean(out, form)


def test_a_key_echoed_in_another_case_or_reversed_is_masked():
    scrubber = Scrubber([KEY])
    for echo in (KEY.upper(), KEY.lower(), KEY[::-1], KEY.upper()[:14]):
        out = scrubber.scrub(f"before {echo} after")
        assert out == "before *** after", (echo, out)


def test_text_without_secrets_is_left_alone_and_short_pieces_stay():
    scrubber = Scrubber([KEY])
    text = f"sk-proj- is a prefix, {KEY[:11]} is too short to matter"
    assert scrubber.scrub(text) is text
    assert not Scrubber([]).hits(KEY)


def test_a_large_reply_is_scrubbed_whole():
    """A megabyte of text with the key at its very end: masked, and nothing else changed (how long
    it takes is a benchmark's, not a test's, to say)."""
    scrubber = Scrubber([KEY, "another-secret-value-123456"])
    text = "lorem ipsum dolor sit amet " * 40_000 + KEY
    out = scrubber.scrub(text)
    assert out == "lorem ipsum dolor sit amet " * 40_000 + "***" and clean(out)


def test_a_result_is_scrubbed_in_place_everywhere(monkeypatch):
    monkeypatch.setenv("FARM_TEST_SCRUB_KEY", KEY)
    config = FarmConfig(connectors={"c": Connector(base_url="http://x/v1", api_key_env="FARM_TEST_SCRUB_KEY")})  # noqa: F841 (alive: its secrets count)
    result = CaseResult(id="c", status="failed", error=f"boom {KEY}", logs=[KEY[5:20]])
    result.turns.append(TurnResult(turn=1, input={"k": KEY}, output=f"echo {KEY}"))
    written = []

    class Sink:
        def write(self, r):
            written.append(r.model_dump_json())

        def flush(self):
            pass

        def close(self):
            pass

    MultiWriter([Sink()]).write(result)
    assert clean(written[0]) and "***" in written[0]
    assert result.turns[0].output == "echo ***"  # in place: what prints next is clean too
    assert scrub_result(result) is result
    assert KEY in process_scrubber().secrets


def test_the_process_scrubber_follows_the_environment_and_the_configs(monkeypatch):
    """It is kept between results, and made anew once a key's value, a URL or a header changes."""
    monkeypatch.delenv("FARM_TEST_LATER_KEY", raising=False)
    config = FarmConfig(connectors={"c": Connector(base_url="http://127.0.0.1:9/v1", api_key_env="FARM_TEST_LATER_KEY")})
    assert process_scrubber() is process_scrubber()
    assert KEY not in process_scrubber().secrets
    monkeypatch.setenv("FARM_TEST_LATER_KEY", KEY)
    assert KEY in process_scrubber().secrets
    config.connectors["c"].headers["X-Api-Token"] = "tok-" + KEY[::-1]
    assert "tok-" + KEY[::-1] in process_scrubber().secrets
    config.connectors["c"].base_url = "http://user:pw-0123456789@127.0.0.1:9/v1"
    assert "pw-0123456789" in process_scrubber().secrets


def test_run_json_and_agents_redact_url_credentials_and_every_header():
    config = FarmConfig(
        connectors={
            "c": Connector(
                base_url="https://bob:pa55-word-long@api.example.com/v1?api_key=qk-1234567890abcdef&api-version=2024-01-01",
                headers={"X-Api-Key": "hdr-1234567890abcdef", "X-Org": "acme"},
            )
        },
        agents={"a": AgentConfig(kind="http", url="https://u:another-pass-word@h/x?token=tok-1234567890")},
    )
    dumped = json.dumps(config.safe_dump())
    for secret in ("pa55-word-long", "qk-1234567890abcdef", "hdr-1234567890abcdef", "acme", "another-pass-word", "tok-1234567890"):
        assert secret not in dumped
    assert "api-version=2024-01-01" in dumped and "api.example.com" in dumped
    assert redact_url("https://h/v1?key=abc&x=1") == "https://h/v1?key=***&x=1"


def test_an_error_body_is_scrubbed_before_it_is_cut(monkeypatch):
    monkeypatch.setenv("FARM_TEST_CUT_KEY", KEY)

    def handler(path, body, headers):
        return Response({"error": {"message": "x" * 176 + KEY + " and more"}}, status=400)

    async def main(url):
        agent = OpenAIAgent(Connector(name="c", base_url=url, api_key_env="FARM_TEST_CUT_KEY", max_retries=0), AgentConfig(id="t"))
        try:
            await agent.send([{"role": "user", "content": "hi"}], {})
        except AgentHTTPError as exc:
            return str(exc)
        finally:
            await agent.aclose()

    with JSONServer(handler) as server:
        message = asyncio.run(main(f"{server.url}/v1"))
    assert message and "x" * 100 in message
    assert clean(message) and KEY[:4] not in message.split("x" * 176)[-1][:4]


def test_secret_headers_give_their_value_with_and_without_the_scheme_word():
    headers = {"Authorization": "Bearer tok-123456789", "X-Api-Key": "k-987654321", "Accept": "application/json"}
    assert header_secrets(headers) == {"Bearer tok-123456789", "tok-123456789", "k-987654321"}


def test_someone_elses_json_is_scrubbed_as_a_copy_keys_included():
    secret = "sk-generated-Zx8Cv7Bn6Mm5Ll4"
    scrubber = Scrubber([secret])
    cases = [{"id": f"c-{secret}", "tags": [secret[:14]], secret: base64.b64encode(secret.encode()).decode()}]
    clean = scrubber.scrub_json(cases)
    assert clean is not cases and cases[0]["id"] == f"c-{secret}"  # the caller's objects are left as they were
    assert clean == [{"id": "c-***", "tags": ["***"], "***": "***"}]
    untouched = [{"id": "fine", "input": "nothing secret here"}]
    assert scrubber.scrub_json(untouched) is untouched
