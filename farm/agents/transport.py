"""One HTTP request and its answer: the only place that speaks to the network.

The agent clients and the LLM roles send through an :class:`HTTPClient`, an
``httpx.AsyncClient`` with a transport beneath it. By default that transport
is :class:`AiohttpTransport`: one aiohttp keep-alive pool per client, which
parses HTTP in C and stays cheap however many connections it holds. httpx's
own httpcore pools cost several times the CPU per request on the farm's
workload, and the ``httpx-aiohttp`` package maps errors too loosely for the
farm's messages (benchmarks/README.md, figure f, has the figures). A test, or
a user who wants httpcore, a proxy mount or event hooks, passes ``transport=``
(e.g. ``httpx.MockTransport``) or a whole ``client=``.

An :class:`HTTPClient` opens its pool on first use, inside the event loop that
uses it, and must be closed with :meth:`HTTPClient.aclose` in that loop.
aiohttp is imported then too: importing it loads the CA bundle (0.1-0.4 s on
a busy machine), which a run of Python agents never needs.

Replies are read as a stream and counted after decompression: a 2xx body
larger than ``max_reply_bytes`` stops the reading at that size, so a gzip bomb
or an endless stream never fills the memory. A small uncompressed reply (its
``Content-Length`` at most :data:`WHOLE_BODY_BYTES`) is read whole by the
transport, then held to the same bounds. Errors::

    TransportError    no answer came: ``reason`` in words, ``retryable``, ``maybe_served``, ``connect_failed``
    ReplyTooLarge     an answer came, larger than ``max_reply_bytes``; reading stopped there
"""

from __future__ import annotations

import base64
import json
import os
import sys
import urllib.request
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from farm.errors import ReplyTooLarge, TransportError

if TYPE_CHECKING:
    import aiohttp


def _import_httpx() -> None:
    """Import httpx without its command-line client: ``httpx/__init__`` imports ``httpx._main``
    (click, pygments, rich's syntax and progress: ~20 ms of every run's start) and, when that
    import fails, defines a stub ``httpx.main`` instead. The client is the same; the block is
    lifted right after, so that an explicit ``import httpx._main`` still works."""
    if "httpx" in sys.modules:
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]  # None: "cannot be imported"
    try:
        import httpx  # noqa: F401
    finally:
        del sys.modules["httpx._main"]


_import_httpx()

import httpx  # noqa: E402  (imported just above, without its command-line client)

__all__ = [
    "AiohttpTransport",
    "DEFAULT_CONNECTIONS",
    "DEFAULT_MAX_REPLY_BYTES",
    "ERROR_BODY_LIMIT",
    "HTTPClient",
    "HTTPReply",
    "ReplyTooLarge",
    "TransportError",
    "USER_AGENT",
    "preload",
]

DEFAULT_CONNECTIONS = 100
"""Connections of a pool when the caller does not size it: as many requests in flight to one host."""

DEFAULT_MAX_REPLY_BYTES = 10_000_000
"""Largest reply body read, after decompression (a connector's ``max_reply_bytes``)."""

ERROR_BODY_LIMIT = 65_536
"""Bytes read of a non-2xx body: enough for the endpoint's explanation; the rest is dropped unread."""

USER_AGENT = "agent-test-farm"

WHOLE_BODY_BYTES = 65_536
"""A reply no larger than this (by its ``Content-Length``, not compressed) is read whole by the
transport; a larger or compressed one is read step by step, within ``max_reply_bytes``."""

_WHOLE_BODY = "farm.whole_body"
"""The response extension that holds a body the transport read whole (``WHOLE_BODY_BYTES``)."""

_URLS_KEPT = 256

_ACCEPT_ENCODING = "gzip, deflate"
"""Only what the bounded reader can inflate step by step (httpx would add br and zstd when installed)."""


def preload() -> None:
    """Import aiohttp now, in a process that will send requests: not in its first request."""
    import aiohttp  # noqa: F401


class HTTPReply:
    """A whole answer: ``status``, ``headers`` (case-insensitive) and the ``body`` bytes."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ``ValueError`` when it is not."""
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"HTTPReply({self.status}, {len(self.body)} bytes)"


class HTTPClient:
    """An ``httpx.AsyncClient`` of up to ``connections`` keep-alive connections, opened on first use.

    ``transport``: what sits beneath httpx (default :class:`AiohttpTransport`);
    ``client``: a whole ``httpx.AsyncClient`` to send with instead (closed with this one).
    Redirects are reported, not followed: a redirected POST would turn into a GET without its body.
    """

    def __init__(
        self,
        connections: int = DEFAULT_CONNECTIONS,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None,
    ):
        self.connections = max(1, connections)
        self._transport = transport
        self._client = client
        self._timeouts: dict[tuple[float, float], httpx.Timeout] = {}
        self._urls: dict[str, httpx.URL] = {}
        self.closed = False

    def _open(self) -> httpx.AsyncClient:
        if self.closed:
            raise RuntimeError("this HTTP client is closed")
        self._client = _AsyncClient(
            transport=self._transport or AiohttpTransport(self.connections),
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": _ACCEPT_ENCODING},
            follow_redirects=False,
            trust_env=False,  # the aiohttp transport reads the proxy settings itself, once per host
        )
        return self._client

    def _url(self, url: str) -> httpx.URL:
        """``url`` parsed once: httpx parses a string again on every request (~30 µs)."""
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= _URLS_KEPT:
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    def _timeout(self, read: float, connect: float) -> httpx.Timeout:
        key = (read, connect)
        timeout = self._timeouts.get(key)
        if timeout is None:
            # read bounds the wait for the answer, as an LLM call needs; no pool timeout, so a
            # request waiting for a free connection is bounded by the turn's timeout instead.
            timeout = self._timeouts[key] = httpx.Timeout(read, connect=connect, pool=None)
        return timeout

    async def request(
        self,
        method: str,
        url: str,
        *,
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: float,
        connect_timeout: float,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> HTTPReply:
        """Send one request and read the answer; :class:`TransportError` if none came,
        :class:`ReplyTooLarge` if a 2xx body grows past ``max_reply_bytes``."""
        if self.closed:
            raise RuntimeError("this HTTP client is closed")
        client = self._client or self._open()
        try:
            request = client.build_request(
                method, self._url(url), content=body, headers=headers, timeout=self._timeout(timeout, connect_timeout)
            )
            response = await client.send(request, stream=True)
            try:
                if response.is_success:
                    data = await _read_bounded(response, max_reply_bytes, clip=False)
                else:
                    data = await _read_bounded(response, min(max_reply_bytes, ERROR_BODY_LIMIT), clip=True)
            finally:
                await response.aclose()
        except httpx.ConnectTimeout:
            raise TransportError("the connection could not be made in time", retryable=True, connect_failed=True) from None
        except (httpx.TimeoutException, TimeoutError):
            raise TransportError(
                f"no answer came within the {timeout:g} s timeout", retryable=True, maybe_served=True, timed_out=True
            ) from None
        except httpx.ConnectError as exc:
            raise TransportError(f"the endpoint could not be reached ({_first_line(exc)})", retryable=True, connect_failed=True) from None
        except (httpx.RemoteProtocolError, httpx.NetworkError) as exc:
            raise TransportError(
                f"the connection broke before an answer came ({_first_line(exc) or type(exc).__name__})",
                retryable=True,
            ) from None
        except (httpx.InvalidURL, httpx.UnsupportedProtocol):
            raise TransportError("the URL is not valid", retryable=False) from None
        except httpx.DecodingError as exc:
            raise TransportError(f"the body could not be decoded ({_first_line(exc)})", retryable=False) from None
        except httpx.HTTPError as exc:
            reason = str(exc) if type(exc) is httpx.TransportError else f"{type(exc).__name__}: {_first_line(exc)}"
            raise TransportError(reason, retryable=False) from None
        return HTTPReply(response.status_code, response.headers, data)

    async def aclose(self) -> None:
        self.closed = True
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        elif self._transport is not None:
            await self._transport.aclose()

    def __repr__(self) -> str:
        return f"HTTPClient(connections={self.connections}{', closed' if self.closed else ''})"


class _Cookies(httpx.Cookies):
    """httpx's cookie jar, passing over answers that set no cookie: httpx builds a urllib
    request and response around every answer to offer it to the jar (~85 µs each)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        if "set-cookie" in response.headers:
            super().extract_cookies(response)


class _AsyncClient(httpx.AsyncClient):
    """``httpx.AsyncClient`` with the cookie jar above; otherwise httpx's own."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self._jar = _Cookies(kwargs.get("cookies"))

    @property
    def cookies(self) -> httpx.Cookies:
        return self._jar

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._jar = _Cookies(cookies)


# -- reading a body within bounds ---------------------------------------------------


async def _read_bounded(response: httpx.Response, limit: int, *, clip: bool) -> bytes:
    """The decoded body, at most ``limit`` bytes of it: past that :class:`ReplyTooLarge`,
    or with ``clip`` the first ``limit`` bytes. Never holds more than ``limit`` plus one chunk,
    or a body the transport read whole (:data:`WHOLE_BODY_BYTES` at most)."""
    body = response.extensions.get(_WHOLE_BODY)  # read whole by the AiohttpTransport
    if body is None:
        try:
            body = response.content  # a reply that came whole, already decoded (httpx.MockTransport)
        except httpx.ResponseNotRead:
            return await _read_stream(response, limit, clip=clip)
    if len(body) <= limit:
        return body
    if clip:
        return body[:limit]
    raise ReplyTooLarge(limit)


async def _read_stream(response: httpx.Response, limit: int, *, clip: bool) -> bytes:
    inflater = _Inflater.for_encoding(response.headers.get("content-encoding", ""))
    if inflater is None and not clip:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise ReplyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        room = limit - size
        data = raw if inflater is None else inflater.feed(raw, room + 1)
        if len(data) > room:
            if not clip:
                raise ReplyTooLarge(limit)
            chunks.append(data[:room])
            break
        chunks.append(data)
        size += len(data)
    return b"".join(chunks)


class _Inflater:
    """gzip or deflate, decompressed step by step with a bound on what each step may produce.

    httpx's own decoders inflate a whole chunk at once (a 64 KiB chunk of a gzip bomb is 64 MB).
    Other encodings are passed through as they came, as httpx does; the farm asks for none.
    """

    def __init__(self, encoding: str):
        self.encoding = encoding
        self._deflate = encoding == "deflate"
        self._decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16 if not self._deflate else zlib.MAX_WBITS)
        self._started = False

    @classmethod
    def for_encoding(cls, header: str) -> _Inflater | None:
        encoding = header.strip().lower()
        return cls(encoding) if encoding in ("gzip", "x-gzip", "deflate") else None

    def feed(self, data: bytes, at_most: int) -> bytes:
        """What ``data`` inflates to, cut at ``at_most`` bytes (a longer result means: too large)."""
        try:
            out = self._decompressor.decompress(data, at_most)
        except zlib.error as exc:
            if not (self._deflate and not self._started):
                raise httpx.DecodingError(f"{self.encoding}: {exc}") from None
            self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
            try:
                out = self._decompressor.decompress(data, at_most)
            except zlib.error as exc:
                raise httpx.DecodingError(f"{self.encoding}: {exc}") from None
        self._started = True
        return out


# -- the transport beneath httpx: one aiohttp pool ------------------------------------


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx's transport seam over one aiohttp pool of up to ``connections`` connections.

    Honours ``HTTP(S)_PROXY`` and ``NO_PROXY`` from the environment, as curl does,
    deciding once per host (aiohttp's own ``trust_env`` looks again on every
    request, in a thread: measured here at twice the CPU of the request itself).
    aiohttp's errors become httpx's own, one for one, so that the farm's
    messages say what happened (a server that hung up is not a connect timeout).
    Bodies are passed on as they came (no decompression here: httpx's reader does it).
    """

    def __init__(self, connections: int = DEFAULT_CONNECTIONS):
        self.connections = max(1, connections)
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[Any, Any], aiohttp.ClientTimeout] = {}
        self._proxies = urllib.request.getproxies()
        self._proxy_by_origin: dict[tuple[str, str], tuple[str | None, dict[str, str] | None]] = {}

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.connections),
            auto_decompress=False,
        )
        return self._session

    def _proxy(self, url: str) -> tuple[str | None, dict[str, str] | None]:
        """The proxy for ``url`` and the headers that carry its credentials; (None, None) for none."""
        if not self._proxies:
            return None, None
        parts = urlsplit(url)
        origin = (parts.scheme, parts.netloc)
        found = self._proxy_by_origin.get(origin)
        if found is None:
            proxy = self._proxies.get(parts.scheme)
            if proxy is None or urllib.request.proxy_bypass(parts.hostname or ""):
                found = (None, None)
            else:
                address = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
                auth = None
                if address.username:
                    pair = f"{unquote(address.username)}:{unquote(address.password or '')}".encode()
                    auth = {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}
                found = (address._replace(netloc=address.netloc.rpartition("@")[2]).geturl(), auth)
            self._proxy_by_origin[origin] = found
        return found

    def _timeout(self, timeouts: Mapping[str, Any]) -> aiohttp.ClientTimeout:
        key = (timeouts.get("read"), timeouts.get("connect"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            import aiohttp

            timeout = self._timeouts[key] = aiohttp.ClientTimeout(total=None, sock_connect=key[1], sock_read=key[0])
        return timeout

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        import aiohttp

        session = self._session or self._open()
        # httpx has made any credentials in the URL into the Authorization header, as httpcore
        # sends them; aiohttp would refuse a URL with credentials beside that header
        url = str(request.url.copy_with(username=None, password=None) if request.url.userinfo else request.url)
        # as given, in their own case (httpx's mapping view lowercases the names)
        headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in request.headers.raw]
        proxy, proxy_headers = self._proxy(url)
        if proxy_headers and url.startswith("http:"):  # sent to the proxy with the request itself
            headers, proxy_headers = [*headers, *proxy_headers.items()], None
        try:
            response = await session.request(
                request.method,
                url,
                data=request.content or None,
                headers=headers,
                timeout=self._timeout(request.extensions.get("timeout", {})),
                proxy=proxy,
                proxy_headers=proxy_headers,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc, request) from exc
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode()}
        if response.content_length is not None and response.content_length <= WHOLE_BODY_BYTES and "Content-Encoding" not in response.headers:
            # A small body as it came, read at once and handed over whole (the stream gives it too):
            # reading it chunk by chunk through httpx costs more CPU than the request's own reading.
            try:
                body = await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _httpx_error(exc, request) from exc
            finally:
                response.release()
            extensions[_WHOLE_BODY] = body
            return httpx.Response(response.status, headers=response.raw_headers, stream=httpx.ByteStream(body), request=request, extensions=extensions)
        return httpx.Response(
            response.status, headers=response.raw_headers, stream=_AiohttpBody(response, request), request=request, extensions=extensions
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _AiohttpBody(httpx.AsyncByteStream):
    """An aiohttp body as httpx reads it: chunks as they arrive; closing returns the connection
    to the pool when the body was read to its end, and drops it otherwise."""

    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request):
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _httpx_error(exc, self._request) from exc

    async def aclose(self) -> None:
        self._response.release()


def _httpx_error(exc: Exception, request: httpx.Request) -> Exception:
    """aiohttp's error as the httpx error that says the same (an unknown one as httpx.TransportError)."""
    import aiohttp

    message = _first_line(exc)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message, request=request)
    if isinstance(exc, (aiohttp.ServerTimeoutError, TimeoutError)):
        return httpx.ReadTimeout(message, request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(_connect_failure(exc), request=request)
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return httpx.RemoteProtocolError(message or type(exc).__name__, request=request)
    if isinstance(exc, aiohttp.ClientOSError):
        return httpx.ReadError(message or type(exc).__name__, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(message, request=request)
    return httpx.TransportError(f"{type(exc).__name__}: {message}", request=request)


def _connect_failure(exc: aiohttp.ClientConnectorError) -> str:
    """Why a connection could not be made, naming the host and port: aiohttp's own words say
    ``ssl:default`` even for a plain http URL (TLS matters only when the error is about TLS)."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientSSLError):
        return _first_line(exc)
    error = exc.os_error
    reason = os.strerror(error.errno) if isinstance(error.errno, int) and error.errno > 0 else exc.strerror
    return f"cannot connect to {exc.host}:{exc.port}: {reason}"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""
