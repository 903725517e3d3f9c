"""One HTTP request and its answer: the only place that speaks to the network.

The agent clients and the LLM roles send through an :class:`HTTPClient`, a
keep-alive connection pool on aiohttp. aiohttp parses HTTP in C: on the farm's
workload (hundreds of JSON requests in flight per process) it costs about a
fifth of the CPU per request of httpx, and one pool stays cheap however many
connections it holds (benchmarks/README.md, "HTTP clients").

An :class:`HTTPClient` opens its pool on first use, inside the event loop that
uses it, and must be closed with :meth:`HTTPClient.aclose` in that loop.
aiohttp is imported then too: importing it loads the CA bundle (0.1-0.4 s on
a busy machine), which a run of Python agents never needs.
What went wrong before an answer came is a :class:`TransportError` saying so
in words and whether trying again may help.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    import aiohttp

__all__ = ["DEFAULT_CONNECTIONS", "HTTPClient", "HTTPReply", "TransportError", "USER_AGENT", "preload"]

DEFAULT_CONNECTIONS = 100
"""Connections of a pool when the caller does not size it: as many requests in flight to one host."""

USER_AGENT = "agent-test-farm"


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


class TransportError(Exception):
    """No answer came. ``reason`` says why in words; ``retryable``: another attempt may work;
    ``maybe_served``: the endpoint may have done the work (it timed out while answering);
    ``timed_out``: the connector's timeout ran out while waiting for the answer."""

    def __init__(self, reason: str, *, retryable: bool, maybe_served: bool = False, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.maybe_served = maybe_served
        self.timed_out = timed_out


class HTTPClient:
    """A pool of up to ``connections`` keep-alive connections, opened on first use.

    Honours ``HTTP(S)_PROXY`` and ``NO_PROXY`` from the environment, as curl does,
    deciding once per host (aiohttp's own ``trust_env`` looks again on every
    request, in a thread: measured here at twice the CPU of the request itself).
    """

    def __init__(self, connections: int = DEFAULT_CONNECTIONS):
        self.connections = max(1, connections)
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}
        self._proxies = urllib.request.getproxies()
        self._proxy_by_origin: dict[tuple[str, str], tuple[str | None, dict[str, str] | None]] = {}
        self.closed = False

    def _open(self) -> aiohttp.ClientSession:
        import aiohttp

        if self.closed:
            raise RuntimeError("this HTTP client is closed")
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.connections),
            headers={"User-Agent": USER_AGENT},
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

    def _timeout(self, read: float, connect: float) -> aiohttp.ClientTimeout:
        key = (read, connect)
        timeout = self._timeouts.get(key)
        if timeout is None:
            import aiohttp

            # sock_read bounds the wait for the answer, as an LLM call needs; no total, so a
            # request waiting for a free connection is bounded by the turn's timeout instead.
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
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
    ) -> HTTPReply:
        """Send one request and read the whole answer; :class:`TransportError` if none came."""
        import aiohttp

        session = self._session or self._open()
        proxy, proxy_headers = self._proxy(url)
        if proxy_headers and url.startswith("http:"):  # sent to the proxy with the request itself
            headers, proxy_headers = {**headers, **proxy_headers}, None
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                timeout=self._timeout(timeout, connect_timeout),
                proxy=proxy,
                proxy_headers=proxy_headers,
                allow_redirects=False,  # a redirected POST would turn into a GET without its body
            ) as response:
                return HTTPReply(response.status, response.headers, await response.read())
        except aiohttp.ConnectionTimeoutError:
            raise TransportError("the connection could not be made in time", retryable=True) from None
        except (aiohttp.ServerTimeoutError, TimeoutError):
            raise TransportError(
                f"no answer came within the {timeout:g} s timeout", retryable=True, maybe_served=True, timed_out=True
            ) from None
        except aiohttp.ClientConnectorError as exc:
            raise TransportError(f"the endpoint could not be reached ({_first_line(exc)})", retryable=True) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError) as exc:
            raise TransportError(
                f"the connection broke before an answer came ({_first_line(exc) or type(exc).__name__})",
                retryable=True,
            ) from None
        except aiohttp.InvalidURL:
            raise TransportError("the URL is not valid", retryable=False) from None
        except aiohttp.ClientError as exc:
            raise TransportError(f"{type(exc).__name__}: {_first_line(exc)}", retryable=False) from None

    async def aclose(self) -> None:
        self.closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    def __repr__(self) -> str:
        return f"HTTPClient(connections={self.connections}{', closed' if self.closed else ''})"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else ""
