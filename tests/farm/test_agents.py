"""Agent clients: OpenAI-compatible, custom HTTP and Python agents, retries and the factory.

Integration tests talk to a real :class:`JSONServer` on 127.0.0.1; pure
parsing and request building use :class:`CannedHTTP`, an :class:`HTTPClient`
on ``httpx.MockTransport`` that records what it was asked to send.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import threading
import time
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest

from farm.agents import AgentClient, build_agent
from farm.agents import openai as openai_agent
from farm.agents.base import (
    AgentConnectionError,
    AgentError,
    AgentHTTPError,
    AgentResponseError,
    Reply,
)
from farm.agents.http import HTTPAgent, fill_template
from farm.agents.openai import OpenAIAgent, parse_completion
from farm.agents.permits import Limiter, NoLimit, estimate_tokens
from farm.agents.python import PythonAgent
from farm.agents.retry import (
    BACKOFF_CAP,
    RETRY_AFTER_CAP,
    backoff_delay,
    parse_retry_after,
    safe_url,
)
from farm.agents.transport import HTTPClient
from farm.config import AgentConfig, Connector, FarmConfig
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import UsageError

KEY_ENV = "FARM_TEST_AGENTS_KEY"
FAKE_KEY = "sk-test-do-not-leak-4f9c2e"
USER = [{"role": "user", "content": "Hello"}]


class RecordingLimiter:
    def __init__(self) -> None:
        self.acquired: list[int] = []
        self.released: list[int] = []
        self.backoffs: list[float] = []

    async def acquire(self, tokens: int) -> None:
        self.acquired.append(tokens)

    def release(self, tokens_used: int) -> None:
        self.released.append(tokens_used)

    def backoff(self, seconds: float) -> None:
        self.backoffs.append(seconds)


class CannedHTTP(HTTPClient):
    """An :class:`HTTPClient` on ``httpx.MockTransport``: every request is answered with
    ``reply(request)`` (an ``httpx.Response``); ``requests`` holds what was sent."""

    def __init__(self, reply):
        self.requests: list[dict[str, Any]] = []

        def handler(sent: httpx.Request) -> httpx.Response:
            request = {"method": sent.method, "url": str(sent.url), "headers": dict(sent.headers),
                       "body": json.loads(sent.content)}
            self.requests.append(request)
            return reply(request)

        super().__init__(transport=httpx.MockTransport(handler))


def json_reply(data: Any, status: int = 200) -> httpx.Response:
    return httpx.Response(status, json=data)


def connector(url: str, **kw: Any) -> Connector:
    return Connector(name="test-conn", base_url=url, model="m-1", **kw)


def agent(**kw: Any) -> AgentConfig:
    return AgentConfig(id=kw.pop("id", "target"), **kw)


def run(coro):
    return asyncio.run(coro)


async def send_once(client: AgentClient, messages=USER, options=None) -> Reply:
    try:
        return await client.send(messages, options or {})
    finally:
        await client.aclose()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- limiter ---------------------------------------------------------------------


def test_no_limit_is_a_limiter_and_never_waits():
    limiter = NoLimit()
    assert isinstance(limiter, Limiter)
    assert isinstance(RecordingLimiter(), Limiter)
    run(limiter.acquire(10**9))
    assert limiter.release(5) is None and limiter.backoff(3.0) is None


def test_estimate_tokens_counts_text_parts_and_max_tokens():
    text = [{"role": "user", "content": "x" * 400}]
    assert estimate_tokens(text) == 100 + 4
    assert estimate_tokens(text, max_tokens=50) == 154
    image = [{"role": "user", "content": [{"type": "text", "text": "y" * 40},
                                          {"type": "image_url", "image_url": {"url": "data:" + "A" * 100_000}}]}]
    # an image counts a fixed amount, not its base64 length
    assert estimate_tokens(image) < 1000


# -- retry policy ----------------------------------------------------------------


def test_parse_retry_after_seconds_date_cap_and_garbage():
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("86400") == RETRY_AFTER_CAP
    now = time.time()
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1.5)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_backoff_grows_with_jitter_and_is_capped():
    first = [backoff_delay(1) for _ in range(50)]
    assert all(0.25 <= d <= 0.5 for d in first)
    assert len(set(first)) > 1  # jitter
    assert all(1.0 <= backoff_delay(3) <= 2.0 for _ in range(50))
    assert all(backoff_delay(30) <= BACKOFF_CAP for _ in range(50))


def test_safe_url_drops_credentials_and_query():
    assert safe_url("https://user:pw@api.example.com/v1/chat?key=abc#x") == "https://api.example.com/v1/chat"


# -- OpenAI: parsing and request building -----------------------------------------


def test_parse_completion_reads_parts_tool_calls_usage_and_declared_awaiting():
    body = chat_completion(
        None,
        [{"name": "create_expense", "arguments": {"amount": 150}}],
        usage=(12, 3),
        extra={"content": [{"type": "text", "text": "Filed."}, {"type": "text", "text": "Anything else?"}],
               "awaiting_input": True},
    )
    body["choices"][0]["message"]["tool_calls"].append(
        {"id": "c2", "type": "function", "function": {"name": "note", "arguments": "not json"}}
    )
    body["input_hint"] = "yes or no"
    reply = parse_completion(body)
    assert reply.content == "Filed.\nAnything else?"
    assert [c.name for c in reply.tool_calls] == ["create_expense", "note"]
    assert reply.tool_calls[0].arguments == {"amount": 150}
    assert reply.tool_calls[1].arguments == "not json"
    assert reply.finish_reason == "tool_calls"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (12, 3, 15)
    assert reply.awaiting_input is True and reply.input_hint == "yes or no"


def test_parse_completion_rejects_a_body_without_choices():
    with pytest.raises(AgentResponseError, match="no choices"):
        parse_completion({"id": "x"})
    with pytest.raises(AgentResponseError, match="quota exceeded"):
        parse_completion({"error": {"message": "quota exceeded"}})


def test_openai_request_body_and_headers(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    http = CannedHTTP(lambda request: json_reply(chat_completion("hi")))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    config = agent(tools=tools, temperature=0.2, max_tokens=64, system_prompt="Be brief.",
                   params={"top_p": 0.5})
    conn = connector("http://agent.test/v1/", api_key_env=KEY_ENV, headers={"X-Team": "qa"})
    options = {"metadata": {"user": "ana", "trace": 1}, "session_id": "s1", "connector": "other"}

    reply = run(OpenAIAgent(conn, config, http=http).send(USER, options))
    assert reply.content == "hi"
    [seen] = http.requests
    assert seen["method"] == "POST"
    assert seen["url"] == "http://agent.test/v1/chat/completions"
    assert seen["headers"]["authorization"] == f"Bearer {FAKE_KEY}"
    assert seen["headers"]["x-team"] == "qa"
    body = seen["body"]
    assert body["model"] == "m-1"
    assert body["messages"] == [{"role": "system", "content": "Be brief."}, *USER]
    assert body["tools"] == tools
    assert (body["temperature"], body["max_tokens"], body["top_p"]) == (0.2, 64, 0.5)
    assert body["user"] == "ana"
    assert "metadata" not in body and "session_id" not in body and "connector" not in body


def test_openai_sends_no_authorization_without_a_key(monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    http = CannedHTTP(lambda request: json_reply(chat_completion("ok")))
    assert run(OpenAIAgent(connector("http://a.test", api_key_env=KEY_ENV), agent(), http=http).send(USER, {})).content == "ok"
    [seen] = http.requests
    assert "authorization" not in seen["headers"]
    assert "tools" not in seen["body"] and "temperature" not in seen["body"]


def test_openai_closes_only_its_own_client():
    async def go():
        shared = HTTPClient()
        await OpenAIAgent(connector("http://a.test"), agent(), http=shared).aclose()
        assert not shared.closed
        own = OpenAIAgent(connector("http://a.test"), agent())
        await own.aclose()
        return own._http.closed

    assert run(go()) is True


# -- OpenAI against a real server ------------------------------------------------


def test_openai_agent_against_a_real_server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    seen: list[tuple[str, Any, dict[str, str]]] = []

    def handler(path, body, headers):
        seen.append((path, body, headers))
        return Response(chat_completion(
            "Let me file that.",
            [{"id": "call_a", "name": "create_expense", "arguments": {"amount": 150, "currency": "EUR"}}],
            usage=(30, 8),
        ))

    limiter = RecordingLimiter()
    with JSONServer(handler) as server:
        client = OpenAIAgent(connector(server.url + "/v1", api_key_env=KEY_ENV), agent(), limiter=limiter)
        reply = run(send_once(client))

    assert reply.content == "Let me file that."
    assert reply.tool_calls[0].id == "call_a"
    assert reply.tool_calls[0].name == "create_expense"
    assert reply.tool_calls[0].arguments == {"amount": 150, "currency": "EUR"}
    assert reply.finish_reason == "tool_calls"
    assert reply.usage.total_tokens == 38
    path, body, headers = seen[0]
    assert path == "/v1/chat/completions"
    assert body["messages"] == USER and body["model"] == "m-1"
    assert headers["Authorization"] == f"Bearer {FAKE_KEY}"
    assert len(limiter.acquired) == 1 and limiter.acquired[0] > 0
    assert limiter.released == [38]  # the reported usage, not the estimate


def test_429_with_retry_after_waits_then_succeeds_and_backs_off_the_connector(monkeypatch: pytest.MonkeyPatch):
    calls = []
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # the wait is asked for, not waited (test_retry.py checks the waits)
        waits.append(seconds)

    monkeypatch.setattr(openai_agent, "request_json", functools.partial(openai_agent.request_json, sleep=sleep))

    def handler(path, body, headers):
        calls.append(path)
        if len(calls) == 1:
            return Response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"})
        return Response(chat_completion("second time lucky"))

    limiter = RecordingLimiter()
    with JSONServer(handler) as server:
        client = OpenAIAgent(connector(server.url), agent(), limiter=limiter)
        reply = run(send_once(client))

    assert reply.content == "second time lucky"
    assert len(calls) == 2
    assert waits == [1.0]
    assert limiter.backoffs == [1.0]
    assert len(limiter.acquired) == 2
    assert limiter.released == [0, 15]  # the refused attempt cost nothing


def test_500_then_success_is_retried():
    state = {"n": 0}

    def handler(path, body, headers):
        state["n"] += 1
        if state["n"] == 1:
            return Response({"error": {"message": "boom"}}, status=500)
        return Response(chat_completion("recovered"))

    limiter = RecordingLimiter()
    with JSONServer(handler) as server:
        reply = run(send_once(OpenAIAgent(connector(server.url), agent(), limiter=limiter)))
        requests = server.requests

    assert reply.content == "recovered"
    assert requests == 2
    assert limiter.backoffs == []  # only a 429 pauses the connector


def test_400_is_not_retried():
    with JSONServer(lambda p, b, h: Response({"error": {"message": "model 'nope' not found"}}, status=400)) as server:
        with pytest.raises(AgentHTTPError) as info:
            run(send_once(OpenAIAgent(connector(server.url, max_retries=5), agent())))
        requests = server.requests

    assert requests == 1
    assert info.value.status_code == 400
    message = str(info.value)
    assert "400 Bad Request" in message and "model 'nope' not found" in message
    assert "after 1 request" in message and "target" in message


def test_exhausted_retries_raise_an_http_error_without_the_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)

    paths = []

    def handler(path, body, headers):
        paths.append(path)
        # a careless server that echoes the credentials back
        return Response({"error": {"message": f"overloaded, auth was {headers.get('Authorization')}"}},
                        status=503, headers={"Retry-After": "0"})

    with JSONServer(handler) as server:
        conn = connector(server.url + "/v1?api-key=" + FAKE_KEY, api_key_env=KEY_ENV, max_retries=2)
        with pytest.raises(AgentHTTPError) as info:
            run(send_once(OpenAIAgent(conn, agent())))
        requests = server.requests

    assert requests == 3
    assert paths[0] == f"/v1/chat/completions?api-key={FAKE_KEY}"
    exc = info.value
    assert exc.status_code == 503 and exc.retry_after == 0.0
    text = " ".join([str(exc), repr(exc), *map(str, exc.args)])
    assert FAKE_KEY not in text
    assert "Bearer" not in text or "***" in text
    assert "after 3 requests" in str(exc) and "503 Service Unavailable" in str(exc)
    assert exc.__cause__ is None


def test_connect_error_to_a_closed_port():
    conn = Connector(name="dead", base_url=f"http://127.0.0.1:{closed_port()}", max_retries=1)
    limiter = RecordingLimiter()
    with pytest.raises(AgentConnectionError) as info:
        run(send_once(OpenAIAgent(conn, agent(), limiter=limiter)))
    assert "cannot be reached: 2 connections failed and none was ever answered" in str(info.value)  # never answered: the run stops on it
    assert limiter.released == [0, 0]


def test_timeout_is_honoured():
    with JSONServer(lambda p, b, h: Response(chat_completion("late"), delay=2.0)) as server:
        conn = connector(server.url, timeout="300ms", max_retries=0)
        started = time.monotonic()
        with pytest.raises(AgentConnectionError) as info:
            run(send_once(OpenAIAgent(conn, agent())))
        elapsed = time.monotonic() - started
    assert elapsed < 1.5
    assert "0.3 s timeout" in str(info.value)


def test_a_connection_closed_before_the_answer_is_retried_then_reported():
    """A server that reads the request and hangs up: retried, then one sentence saying so."""
    accepted = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn.recv(65536))
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    limiter = RecordingLimiter()
    conn = connector(f"http://127.0.0.1:{listener.getsockname()[1]}", max_retries=1)
    try:
        with pytest.raises(AgentConnectionError) as info:
            run(send_once(OpenAIAgent(conn, agent(), limiter=limiter)))
    finally:
        listener.close()
    assert "the connection broke before an answer came" in str(info.value)
    assert "after 2 requests" in str(info.value)
    assert len(accepted) == 2 and accepted[0].startswith(b"POST /chat/completions HTTP/1.1")
    assert limiter.released == [0, 0]


def test_a_2xx_body_that_is_not_json_is_a_response_error():
    http = CannedHTTP(lambda request: httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html>gateway</html>"))
    with pytest.raises(AgentResponseError, match="not JSON"):
        run(OpenAIAgent(connector("http://a.test"), agent(), http=http).send(USER, {}))


# -- HTTP agent ------------------------------------------------------------------


def test_fill_template_replaces_whole_values_and_substitutes_text():
    values = {"messages": USER, "input": "Hello", "options": {"mode": "x"}, "session_id": "s1", "model": None}
    template = {"q": "{{input}}", "history": "{{messages}}", "opts": "{{options}}",
                "note": "session {{session_id}}: {{options}}", "n": 3, "list": ["{{model}}", "{{ input }}"]}
    assert fill_template(template, values) == {
        "q": "Hello", "history": USER, "opts": {"mode": "x"}, "note": 'session s1: {"mode": "x"}',
        "n": 3, "list": [None, "Hello"],
    }


def test_http_agent_rejects_unknown_placeholders_and_bad_paths():
    with pytest.raises(UsageError, match=r'agents\."h"\.request: unknown placeholder \{\{prompt\}\}'):
        HTTPAgent(None, agent(id="h", kind="http", url="http://x.test", request={"p": "{{prompt}}"}))
    with pytest.raises(ValueError, match=r"'\$\.\[\[\[' is not a JSONPath \(at character 4\)"):  # the config refuses it as it is made
        agent(id="h", kind="http", url="http://x.test", content_path="$.[[[")
    with pytest.raises(UsageError, match=r'agents\."h"\.content_path: .* is not a JSONPath'):  # and the agent, one made without checks
        HTTPAgent(None, AgentConfig.model_construct(id="h", kind="http", url="http://x.test", content_path="$.[[["))
    with pytest.raises(UsageError, match="needs a url"):
        HTTPAgent(None, agent(id="h", kind="http"))


def test_http_agent_template_jsonpath_and_session_header():
    seen: list[tuple[Any, dict[str, str]]] = []

    def handler(path, body, headers):
        seen.append((body, headers))
        return Response(
            {"data": {"answer": {"text": f"echo {body['question']}"},
                      "calls": [{"name": "ask_user", "arguments": '{"field": "amount"}'}],
                      "state": {"waiting": True, "hint": "an amount"}}},
            headers={"X-Session": "server-42"},
        )

    config = agent(
        id="custom", kind="http",
        request={"question": "{{input}}", "history": "{{messages}}",
                 "ctx": {"opts": "{{options}}", "sid": "{{session_id}}"}},
        content_path="$.data.answer.text",
        tool_calls_path="$.data.calls",
        awaiting_input_path="$.data.state.waiting",
        input_hint_path="$.data.state.hint",
        session_header="X-Session",
    )
    options = {"session_id": "case-7", "metadata": {"k": 1}}

    async def go(url):
        client = HTTPAgent(None, config.model_copy(update={"url": url + "/chat"}))
        try:
            first = await client.send(USER, options)
            second = await client.send([*USER, {"role": "user", "content": "again"}], options)
            return first, second
        finally:
            await client.aclose()

    with JSONServer(handler) as server:
        first, second = run(go(server.url))

    assert first.content == "echo Hello" and second.content == "echo again"
    assert first.tool_calls[0].name == "ask_user" and first.tool_calls[0].arguments == {"field": "amount"}
    assert first.awaiting_input is True and first.input_hint == "an amount"
    body, headers = seen[0]
    assert body["history"] == USER and body["ctx"]["opts"] == options
    assert headers["X-Session"] == "case-7" and body["ctx"]["sid"] == "case-7"
    body2, headers2 = seen[1]
    assert headers2["X-Session"] == "server-42"  # the server's id was adopted
    assert body2["ctx"]["sid"] == "server-42"


def test_http_agent_defaults_openai_shape_text_body_and_own_session_id():
    seen: list[tuple[Any, dict[str, str]]] = []
    answers = iter([
        Response({"content": "plain", "awaiting_input": "true", "input_hint": "say more"}),
        Response(chat_completion("openai shaped", usage=(4, 2))),
        Response("just text"),
        Response({"unrelated": 1}),
    ])

    def handler(path, body, headers):
        seen.append((body, headers))
        return next(answers)

    async def go(url):
        client = HTTPAgent(Connector(name="c", base_url=url + "/agent", max_retries=0),
                           agent(id="h", kind="http", session_header="X-Sid"))
        try:
            replies = [await client.send(USER, {}) for _ in range(3)]
            with pytest.raises(AgentResponseError, match=r"nothing at \$\.content"):
                await client.send(USER, {})
            return replies
        finally:
            await client.aclose()

    with JSONServer(handler) as server:
        plain, shaped, text = run(go(server.url))

    assert (plain.content, plain.awaiting_input, plain.input_hint) == ("plain", True, "say more")
    assert shaped.content == "openai shaped" and shaped.usage.total_tokens == 6
    assert text.content == "just text"
    assert seen[0][0] == {"messages": USER}  # the default template
    sids = {headers["X-Sid"] for _, headers in seen}
    assert len(sids) == 1 and len(sids.pop()) >= 16  # one id per client instance


def test_http_agent_reads_a_text_body_as_the_reply():
    http = CannedHTTP(lambda request: httpx.Response(200, headers={"content-type": "text/plain"}, content=b"Sure, what amount?"))
    client = HTTPAgent(None, agent(id="h", kind="http", url="http://h.test", method="PUT"), http=http)
    assert run(client.send(USER, {})).content == "Sure, what amount?"
    assert [r["method"] for r in http.requests] == ["PUT"]


def test_http_agent_retries_like_the_openai_agent():
    state = {"n": 0}

    def handler(path, body, headers):
        state["n"] += 1
        if state["n"] == 1:
            return Response({"error": "busy"}, status=502)
        return Response({"content": "ok"})

    with JSONServer(handler) as server:
        reply = run(send_once(HTTPAgent(Connector(name="c", base_url=server.url), agent(id="h", kind="http"))))
        requests = server.requests
    assert reply.content == "ok" and requests == 2


# -- Python agent ----------------------------------------------------------------


def write_module(folder: Path, name: str, source: str) -> None:
    (folder / f"{name}.py").write_text(source, encoding="utf-8")


def python_config(folder: Path, entry: str) -> FarmConfig:
    return FarmConfig(agents={"py": {"kind": "python", "entry": entry}}, path=folder / "farm.toml")


def test_python_agent_sync_runs_in_a_thread_and_returns_a_dict(tmp_path):
    write_module(tmp_path, "farm_test_sync_agent", """
import threading
together = threading.Barrier(3, timeout=30)
def answer(messages, options):
    together.wait()  # all three calls at once, or this breaks
    messages.append({"role": "user", "content": "mutated"})
    return {"content": "sync: " + messages[0]["content"], "tool_calls": [{"name": "ask_user", "arguments": {"q": 1}}],
            "awaiting_input": True, "input_hint": "h", "usage": {"prompt_tokens": 2, "completion_tokens": 1},
            "thread": threading.get_ident(), "session": options.get("session_id")}
""")
    client = build_agent(python_config(tmp_path, "farm_test_sync_agent:answer"), "py")
    assert isinstance(client, PythonAgent)
    history = list(USER)

    async def go():
        return await asyncio.gather(*(client.send(history, {"session_id": "s"}) for _ in range(3)))

    replies = run(go())  # the three calls met at the barrier (a call that blocked the loop would break it)
    reply = replies[0]
    assert reply.content == "sync: Hello"
    assert reply.tool_calls[0].name == "ask_user" and reply.tool_calls[0].arguments == {"q": 1}
    assert reply.awaiting_input is True and reply.input_hint == "h"
    assert reply.usage.total_tokens == 3
    assert reply.raw["thread"] != threading.get_ident() and reply.raw["session"] == "s"
    assert history == USER  # the agent got a copy


def test_python_agent_async_and_string_and_reply_results(tmp_path):
    write_module(tmp_path, "farm_test_async_agent", """
from farm.agents.base import Reply
async def answer(messages, options):
    return "async: " + messages[-1]["content"]
class Bot:
    @staticmethod
    def reply(messages, options):
        return Reply(content="a reply", finish_reason="stop")
def nothing(messages, options):
    return None
def broken(messages, options):
    raise RuntimeError("database down")
""")
    config = FarmConfig(
        agents={name: {"kind": "python", "entry": f"farm_test_async_agent:{fn}"}
                for name, fn in [("a", "answer"), ("b", "Bot.reply"), ("c", "nothing"), ("d", "broken")]},
        path=tmp_path / "farm.toml",
    )
    assert run(send_once(build_agent(config, "a"))).content == "async: Hello"
    reply = run(send_once(build_agent(config, "b")))
    assert reply.content == "a reply" and reply.finish_reason == "stop"
    with pytest.raises(AgentResponseError, match="returned NoneType"):
        run(send_once(build_agent(config, "c")))
    with pytest.raises(AgentError, match="raised RuntimeError: database down"):
        run(send_once(build_agent(config, "d")))


def test_python_agent_bad_entries_name_the_entry(tmp_path):
    write_module(tmp_path, "farm_test_fine_module", "VALUE = 3\ndef assistant(m, o):\n    return ''\nclass Bot:\n    def answer(self, m, o):\n        return ''\n")
    cases = {
        "farm_test_fine_module:assistent": r"has no attribute 'assistent' \(did you mean 'assistant'\?\)$",
        "farm_test_fine_module:Bot.answr": r"has no attribute 'Bot.answr' \(did you mean 'Bot.answer'\?\)$",
        "farm_test_no_such_module:fn": r"agents\.\"py\"\.entry: module 'farm_test_no_such_module' cannot be imported",
        "farm_test_fine_module:missing": r"module 'farm_test_fine_module' has no attribute 'missing'",
        "farm_test_fine_module:VALUE": r"is a int, not a function",
        "no_colon_here": r"is not of the form 'module:function'",
    }
    for entry, pattern in cases.items():
        with pytest.raises(UsageError, match=pattern):
            build_agent(python_config(tmp_path, entry), "py")


def test_an_agent_module_edited_since_it_was_loaded_is_loaded_again(tmp_path):
    """A process that runs again (a notebook; a session actor kept for the next run) runs the agent as its file now is."""
    module = tmp_path / "farm_test_edited_agent.py"
    module.write_text("def answer(messages, options):\n    return 'before'\n")
    config = python_config(tmp_path, "farm_test_edited_agent:answer")
    assert run(send_once(build_agent(config, "py"))).content == "before"
    assert run(send_once(build_agent(config, "py"))).content == "before"  # unchanged: the module as loaded
    module.write_text("def answer(messages, options):\n    return 'after, edited'\n")
    stat = module.stat()
    os.utime(module, (stat.st_atime, stat.st_mtime + 2))  # an edit a moment later
    assert run(send_once(build_agent(config, "py"))).content == "after, edited"


# -- factory ---------------------------------------------------------------------


def farm_config(**agents: dict[str, Any]) -> FarmConfig:
    return FarmConfig(
        connectors={"main": {"base_url": "http://main.test/v1"}, "alt": {"base_url": "http://alt.test/v1"}},
        agents=agents,
    )


def test_factory_builds_by_kind_and_applies_override_and_limiters():
    config = farm_config(
        target={"kind": "openai", "connector": "main"},
        custom={"kind": "http", "connector": "main", "content_path": "$.out"},
        sim={"kind": "simulator", "uses": "custom"},
        judge={"kind": "validator", "connector": "alt"},
    )
    limiters: dict[str, RecordingLimiter] = {}

    def limiter_for(name: str) -> RecordingLimiter:
        return limiters.setdefault(name, RecordingLimiter())

    target = build_agent(config, "target", limiter_for=limiter_for)
    assert isinstance(target, OpenAIAgent) and target.url == "http://main.test/v1/chat/completions"
    assert target.limiter is limiters["main"]
    overridden = build_agent(config, "target", connector_override="alt")
    assert overridden.url == "http://alt.test/v1/chat/completions"
    assert isinstance(overridden.limiter, NoLimit)
    sim = build_agent(config, "sim")
    assert isinstance(sim, HTTPAgent) and sim.config.id == "custom"
    judge = build_agent(config, "judge", limiter_for=limiter_for)
    assert isinstance(judge, OpenAIAgent) and judge.connector.name == "alt" and judge.limiter is limiters["alt"]
    for client in (target, overridden, sim, judge):
        run(client.aclose())


def test_factory_errors_name_the_agent():
    config = farm_config(
        bare={"kind": "openai"},
        lonely={"kind": "validator"},
        a={"kind": "simulator", "uses": "b"},
        b={"kind": "reporter", "uses": "a"},
    )
    with pytest.raises(UsageError, match=r'agents\."bare": kind "openai" needs a connector'):
        build_agent(config, "bare")
    with pytest.raises(UsageError, match=r'agents\."lonely": a validator agent needs "uses"'):
        build_agent(config, "lonely")
    with pytest.raises(UsageError, match=r"in a loop \(a -> b -> a\)"):
        build_agent(config, "a")
    with pytest.raises(UsageError, match="agent 'ghost' is not configured"):
        build_agent(config, "ghost")
    with pytest.raises(UsageError, match="connector 'nope' is not configured"):
        build_agent(config, "bare", connector_override="nope")


# -- the transport -----------------------------------------------------------------


def test_requests_go_through_the_proxy_the_environment_names(monkeypatch):
    """HTTP_PROXY with credentials is used (absolute-form request, Proxy-Authorization); NO_PROXY wins."""
    seen: list[tuple[str, dict[str, str]]] = []

    def proxy(path, body, headers):
        seen.append((path, headers))
        return Response(chat_completion("via proxy"))

    with JSONServer(proxy) as server, JSONServer(lambda p, b, h: Response(chat_completion("direct"))) as agent_server:
        for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", server.url.replace("http://", "http://ana:s3cret@"))
        monkeypatch.setenv("http_proxy", server.url.replace("http://", "http://ana:s3cret@"))
        reply = run(send_once(OpenAIAgent(connector("http://agent.example/v1"), agent())))
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        direct = run(send_once(OpenAIAgent(connector(agent_server.url), agent())))

    assert reply.content == "via proxy" and direct.content == "direct"
    [(path, headers)] = seen
    assert path == "http://agent.example/v1/chat/completions"
    assert {k.lower(): v for k, v in headers.items()}["proxy-authorization"] == "Basic YW5hOnMzY3JldA=="


def test_a_redirect_is_reported_not_followed():
    """A POST that a server redirects is not silently turned into a GET without its body."""
    paths: list[str] = []

    def handler(path, body, headers):
        paths.append(path)
        return Response({"error": {"message": "moved"}}, status=302, headers={"Location": "/elsewhere"})

    with JSONServer(handler) as server:
        with pytest.raises(AgentHTTPError) as info:
            run(send_once(OpenAIAgent(connector(server.url), agent())))
    assert info.value.status_code == 302 and "302 Found" in str(info.value)
    assert paths == ["/chat/completions"]


def test_a_sync_python_agent_serves_every_conversation_at_once_beside_the_event_loop():
    """Beyond asyncio's default pool (cpu_count + 4 threads): all 40 calls are inside the function
    together, and the event loop goes on while they block."""
    together = threading.Barrier(40, timeout=10)

    def blocking(messages, options):
        together.wait()  # raises BrokenBarrierError unless all 40 are here at once
        return "ok"

    agent = PythonAgent(AgentConfig(id="sync", kind="python", entry="m:f"), fn=blocking)

    async def main() -> tuple[list[Reply], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        tick = asyncio.create_task(ticker())
        replies = await asyncio.gather(*(agent.send([{"role": "user", "content": "hi"}], {}) for _ in range(40)))
        tick.cancel()
        await agent.aclose()
        return list(replies), ticks

    replies, ticks = asyncio.run(main())
    assert [r.content for r in replies] == ["ok"] * 40
    assert ticks > 1


def test_a_sync_python_agent_with_a_concurrency_runs_that_many_replies_at_once():
    inside, most = 0, 0
    lock = threading.Lock()

    together = threading.Barrier(3, timeout=30)  # three at once, or a call breaks it

    def counted(messages, options):
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        together.wait()
        with lock:
            inside -= 1
        return "ok"

    agent = PythonAgent(AgentConfig(id="sync", kind="python", entry="m:f", concurrency=3), fn=counted)

    async def main() -> None:
        await asyncio.gather(*(agent.send([{"role": "user", "content": "hi"}], {}) for _ in range(12)))
        await agent.aclose()

    asyncio.run(main())
    assert most == 3
