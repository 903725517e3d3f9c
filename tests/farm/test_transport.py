"""The HTTP seam: httpx beneath the agent clients, errors in the farm's words, bounded replies.

Pure logic fakes the network with ``httpx.MockTransport``; the hostile replies
(a gzip bomb, an endless chunked stream, a 20 MB body) come from a real server
on 127.0.0.1 that writes raw HTTP, and must each end as an error of that turn
with the memory staying flat.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
import threading
import time
import tracemalloc
import zlib
from typing import Any

import httpx
import pytest

from farm.agents.base import AgentHTTPError, AgentReplyTooLargeError, AgentResponseError
from farm.agents.openai import OpenAIAgent
from farm.agents.transport import (
    DEFAULT_MAX_REPLY_BYTES,
    ERROR_BODY_LIMIT,
    HTTPClient,
    TransportError,
    preload,
)
from farm.config import AgentConfig, Connector
from farm.conversation.runner import RunSettings, run_case
from farm.demo.server import chat_completion
from farm.results import Status
from farm.suite.loader import parse_cases

USER = [{"role": "user", "content": "Hello"}]
MB = 1_000_000

preload()  # aiohttp imported now, not while a test traces its memory


class RecordingLimiter:
    def __init__(self) -> None:
        self.acquired: list[int] = []
        self.released: list[int] = []

    async def acquire(self, tokens: int) -> None:
        self.acquired.append(tokens)

    def release(self, tokens_used: int) -> None:
        self.released.append(tokens_used)

    def backoff(self, seconds: float) -> None:
        pass


def openai_agent(url: str, http: HTTPClient | None = None, limiter=None, **connector: Any) -> OpenAIAgent:
    conn = Connector(name="c", base_url=url, model="m", **connector)
    return OpenAIAgent(conn, AgentConfig(id="x"), http=http, limiter=limiter)


async def send_once(agent: OpenAIAgent):
    try:
        return await agent.send(USER, {})
    finally:
        await agent.aclose()


def request(client: HTTPClient, url: str, **kw: Any):
    async def go():
        try:
            return await client.request("POST", url, body=b"{}", headers={}, timeout=5.0, connect_timeout=2.0, **kw)
        finally:
            await client.aclose()

    return asyncio.run(go())


# -- pure logic, on httpx.MockTransport ---------------------------------------------


def mocked(handler) -> HTTPClient:
    return HTTPClient(transport=httpx.MockTransport(handler))


def test_a_mocked_transport_sees_the_request_and_its_reply_comes_back():
    seen: list[httpx.Request] = []

    def handler(sent: httpx.Request) -> httpx.Response:
        seen.append(sent)
        return httpx.Response(200, json=chat_completion("from the mock"))

    reply = asyncio.run(send_once(openai_agent("http://agent.test/v1", http=mocked(handler))))
    assert reply.content == "from the mock"
    [sent] = seen
    assert str(sent.url) == "http://agent.test/v1/chat/completions"
    assert sent.headers["user-agent"] == "agent-test-farm"
    assert sent.headers["accept-encoding"] == "gzip, deflate"  # only what the bounded reader inflates
    assert sent.extensions["timeout"] == {"connect": 10.0, "read": 60.0, "write": 60.0, "pool": None}


@pytest.mark.parametrize(
    "error, reason, retryable, maybe_served",
    [
        (httpx.ConnectTimeout("slow"), "the connection could not be made in time", True, False),
        (httpx.ReadTimeout("slow"), "no answer came within the 5 s timeout", True, True),
        (httpx.ConnectError("refused"), "the endpoint could not be reached (refused)", True, False),
        (httpx.RemoteProtocolError("Server disconnected"), "the connection broke before an answer came (Server disconnected)", True, False),
        (httpx.ReadError("reset"), "the connection broke before an answer came (reset)", True, False),
        (httpx.UnsupportedProtocol("ftp"), "the URL is not valid", False, False),
    ],
)
def test_httpx_errors_become_transport_errors_in_the_farms_words(error, reason, retryable, maybe_served):
    def handler(sent: httpx.Request) -> httpx.Response:
        raise error

    with pytest.raises(TransportError) as info:
        request(mocked(handler), "http://agent.test/")
    assert (info.value.reason, info.value.retryable, info.value.maybe_served) == (reason, retryable, maybe_served)


def test_a_reply_over_the_limit_is_an_error_of_the_call_not_retried_and_costs_the_estimate():
    calls = []

    def handler(sent: httpx.Request) -> httpx.Response:
        calls.append(sent)
        return httpx.Response(200, content=b'{"pad": "' + b"x" * 2000 + b'"}')

    limiter = RecordingLimiter()
    agent = openai_agent("http://agent.test/v1", http=mocked(handler), limiter=limiter, max_reply_bytes=1000, max_retries=3)
    with pytest.raises(AgentReplyTooLargeError) as info:
        asyncio.run(send_once(agent))
    assert isinstance(info.value, AgentResponseError)
    assert str(info.value) == (
        "The reply of agent 'x' at POST http://agent.test/v1/chat/completions "
        "is larger than max_reply_bytes (1000 bytes); stopped reading."
    )
    assert len(calls) == 1
    assert limiter.released == limiter.acquired  # the endpoint did the work: the estimate is kept


def test_an_error_status_keeps_its_explanation_and_drops_a_huge_body():
    def handler(sent: httpx.Request) -> httpx.Response:
        body = json.dumps({"error": {"message": "quota exceeded"}, "pad": "x" * (2 * ERROR_BODY_LIMIT)})
        return httpx.Response(400, content=body.encode())

    with pytest.raises(AgentHTTPError) as info:
        asyncio.run(send_once(openai_agent("http://agent.test/v1", http=mocked(handler))))
    assert info.value.status_code == 400 and "400 Bad Request" in str(info.value)
    reply = request(mocked(handler), "http://agent.test/")
    assert reply.status == 400 and len(reply.body) == ERROR_BODY_LIMIT


def test_a_closed_client_says_so():
    client = mocked(lambda sent: httpx.Response(200))
    asyncio.run(client.aclose())
    with pytest.raises(RuntimeError, match="closed"):
        request(client, "http://agent.test/")


def test_a_refused_connection_names_the_host_and_port_and_no_tls_for_plain_http():
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TransportError) as caught:
        request(HTTPClient(), f"http://127.0.0.1:{port}/v1/chat/completions")
    assert str(caught.value) == f"the endpoint could not be reached (cannot connect to 127.0.0.1:{port}: Connection refused)"
    assert caught.value.retryable


# -- hostile replies from a real server ------------------------------------------------


class RawServer:
    """One-shot HTTP on 127.0.0.1: reads each request, then ``answer(connection)`` writes raw bytes.

    ``answer`` must stop by itself when the client hangs up (a write raises) and be bounded in time.
    ``finished`` is set once every connection's answer has returned.
    """

    def __init__(self, answer):
        self.answer = answer
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.finished = threading.Event()
        self.threads: list[threading.Thread] = []

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(65536)
            try:
                self.answer(conn)
            except OSError:
                pass  # the client hung up
        self.finished.set()

    def __enter__(self) -> RawServer:
        thread = threading.Thread(target=self._serve, daemon=True)
        thread.start()
        self.threads.append(thread)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.listener.close()


def _head(**headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Content-Type: application/json", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


_BOMB: bytes | None = None


def gzip_bomb() -> bytes:
    """~300 KB of gzip that inflates to 300 MB of JSON-looking text, made in 0.1 s.

    After a full flush deflate starts afresh, so every further megabyte of spaces
    is the same block: one is compressed and repeated; the trailer's CRC covers it all.
    """
    global _BOMB
    if _BOMB is None:
        prefix, piece, pieces = b'{"choices": [{"message": {"content": "', b" " * MB, 300
        packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        first = packer.compress(prefix) + packer.compress(piece) + packer.flush(zlib.Z_FULL_FLUSH)
        block = packer.compress(piece) + packer.flush(zlib.Z_FULL_FLUSH)
        crc = zlib.crc32(prefix)
        for _ in range(pieces):
            crc = zlib.crc32(piece, crc)
        size = len(prefix) + pieces * MB
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
        _BOMB = header + first + block * (pieces - 1) + packer.flush() + struct.pack("<II", crc, size & 0xFFFFFFFF)
    return _BOMB


def traced_peak(coro) -> int:
    """Peak bytes Python allocated while ``coro`` ran."""
    tracemalloc.start()
    try:
        asyncio.run(coro)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def expect_too_large(url: str, **connector: Any) -> int:
    """Send one call; assert it ends as the too-large error; return the peak memory of the call."""
    errors: list[Exception] = []

    async def go():
        try:
            await send_once(openai_agent(url, **connector))
        except AgentReplyTooLargeError as exc:
            errors.append(exc)

    peak = traced_peak(go())
    [error] = errors
    assert "is larger than max_reply_bytes" in str(error) and "stopped reading" in str(error)
    return peak


def test_a_gzip_bomb_stops_at_max_reply_bytes_with_flat_memory():
    bomb = gzip_bomb()
    assert len(bomb) < 400_000
    payload = _head(Content_Encoding="gzip", Content_Length=str(len(bomb))) + bomb

    def answer(conn: socket.socket) -> None:
        conn.sendall(payload)

    with RawServer(answer) as server:
        peak = expect_too_large(server.url)
    assert peak < 3 * DEFAULT_MAX_REPLY_BYTES  # stopped at the limit, not inflating its 300 MB  # 300 MB inflated whole would be 30x this


def test_an_endless_chunked_stream_is_cut_and_the_server_sees_the_hang_up():
    chunk = b" " * 65536
    sent = []

    def answer(conn: socket.socket) -> None:
        conn.sendall(_head(Transfer_Encoding="chunked") + b'10\r\n{"choices": [  \r\n')
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(sent) < 2000:  # bounded, should the client never hang up
            conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent.append(1)

    with RawServer(answer) as server:
        peak = expect_too_large(server.url, max_reply_bytes=2 * MB)
        assert server.finished.wait(8.0), "the server still streams after the client stopped reading"  # (its own bound: 10 s)
    assert len(sent) < 200  # 2 MB read, plus what the sockets' buffers held: not the 128 MB on offer
    assert peak < 6 * MB


def test_a_20_mb_body_is_refused_without_being_read():
    body = b'{"pad": "' + b"x" * (20 * MB) + b'"}'
    payload = _head(Content_Length=str(len(body))) + body  # made before the memory is traced

    def answer(conn: socket.socket) -> None:
        conn.sendall(payload)

    with RawServer(answer) as server:
        peak = expect_too_large(server.url)
    assert peak < DEFAULT_MAX_REPLY_BYTES


def test_a_20_mb_body_without_a_length_is_read_only_up_to_the_limit():
    piece = b"x" * MB

    def answer(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        for _ in range(20):
            conn.sendall(piece)

    with RawServer(answer) as server:
        peak = expect_too_large(server.url, max_reply_bytes=3 * MB)
    assert peak < 9 * MB  # read up to 3 MB and joined once, never the 20 MB


def test_a_gzip_reply_within_the_limit_is_read_whole():
    body = gzip.compress(json.dumps(chat_completion("squeezed " * 1000)).encode())

    def answer(conn: socket.socket) -> None:
        conn.sendall(_head(Content_Encoding="gzip", Content_Length=str(len(body))) + body)

    with RawServer(answer) as server:
        reply = asyncio.run(send_once(openai_agent(server.url)))
    assert reply.content == "squeezed " * 1000


def test_a_bomb_is_an_error_of_that_turn_with_one_clear_sentence():
    bomb = gzip_bomb()

    def answer(conn: socket.socket) -> None:
        conn.sendall(_head(Content_Encoding="gzip", Content_Length=str(len(bomb))) + bomb)

    (loaded,) = parse_cases([("t.jsonl:1", {"id": "bomb", "input": "Hello", "assertions": [{"type": "contains", "value": "x"}]})])
    with RawServer(answer) as server:
        agent = openai_agent(server.url + "/v1")
        result = asyncio.run(run_case(loaded, agent, None, RunSettings()))
    assert result.status == Status.ERROR
    assert result.error == (
        f"turn 1: agent error: The reply of agent 'x' at POST {server.url}/v1/chat/completions "
        "is larger than max_reply_bytes (10 MB); stopped reading."
    )
    assert len(result.to_json_line()) < 10_000
