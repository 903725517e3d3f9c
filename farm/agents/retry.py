"""How the HTTP clients make one request: timeouts, rate-limit permits and retries.

Retried, up to ``connector.max_retries`` times after the first attempt:

- status 408, 429, 500, 502, 503, 504;
- the endpoint could not be reached (connect errors and timeouts), a read
  timed out, or the connection broke before an answer came.

The wait before a retry is the endpoint's ``Retry-After`` (seconds or an HTTP
date; ``retry-after-ms`` too), capped at :data:`RETRY_AFTER_CAP`, else
exponential backoff with jitter (:data:`BACKOFF_BASE` doubling up to
:data:`BACKOFF_CAP`). A 429 also pauses the whole connector through
:meth:`Limiter.backoff`. Any other status is final at once.

Error messages say what was attempted, what blocked it and after how many
attempts. They never carry request headers, and the API key, the connector's
secret-looking header values and the URL's query string are scrubbed from
anything an endpoint echoes back.
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any

import httpx

from farm.agents.base import AgentConnectionError, AgentHTTPError, AgentResponseError
from farm.agents.limiter import Limiter
from farm.config import Connector

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "RETRY_AFTER_CAP",
    "RETRY_STATUSES",
    "backoff_delay",
    "new_http_client",
    "parse_retry_after",
    "request_json",
    "safe_url",
    "timeout_for",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

BACKOFF_BASE = 0.5
"""Seconds before the first retry when the endpoint gives no Retry-After (then doubling)."""

BACKOFF_CAP = 20.0
"""Longest wait between two attempts without a Retry-After."""

RETRY_AFTER_CAP = 60.0
"""Longest wait honoured from a Retry-After header."""

CONNECT_TIMEOUT_CAP = 10.0
"""Reaching a host takes seconds, not the minute an LLM may need to answer."""

POOL_CONNECTIONS = 32
"""Connections of a client's own pool: small pools stay cheap (RAY_NOTES, "HTTP clients")."""

_RETRY_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)

_DETAIL_LIMIT = 200


def timeout_for(connector: Connector) -> httpx.Timeout:
    """Explicit timeouts for one request (httpx's 5 s default is far too short for an LLM).

    No pool timeout: waiting for a free connection is bounded by the turn timeout.
    """
    return httpx.Timeout(
        connector.timeout,
        connect=min(connector.timeout, CONNECT_TIMEOUT_CAP),
        pool=None,
    )


_SSL_CONTEXT: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """One verifying SSL context for every client of the process: httpx builds a new one
    per client otherwise (loading the CA bundle, ~30 ms, blocking the event loop)."""
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = ssl.create_default_context()
    return _SSL_CONTEXT


def new_http_client(connector: Connector, connections: int = POOL_CONNECTIONS) -> httpx.AsyncClient:
    """A small client of its own, for an agent client that was not given one.

    Keep ``connections`` small and use several clients for many conversations:
    httpcore scans its whole pool on every request, so one big pool burns CPU.
    """
    return httpx.AsyncClient(
        timeout=timeout_for(connector),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        verify=shared_ssl_context(),
    )


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP date), capped; None if unreadable."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP)


def _retry_after(response: httpx.Response) -> float | None:
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        seconds = parse_retry_after(millis)
        if seconds is not None:
            return min(seconds / 1000.0, RETRY_AFTER_CAP)
    return parse_retry_after(response.headers.get("retry-after"))


def backoff_delay(attempt: int, *, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based): half fixed, half jitter."""
    ceiling = min(cap, base * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def safe_url(url: str | httpx.URL) -> str:
    """The URL without credentials, query or fragment, fit for a message."""
    parsed = httpx.URL(str(url))
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))


def _looks_secret(header: str) -> bool:
    lowered = header.lower()
    return any(word in lowered for word in ("auth", "key", "token", "secret", "cookie"))


def _secrets(connector: Connector, headers: dict[str, str], url: str) -> list[str]:
    found = {connector.api_key() or ""}
    for name, value in headers.items():
        if _looks_secret(name):
            found.add(value)
            found.add(value.split(" ", 1)[-1])  # "Bearer <token>"
    query = httpx.URL(url).query.decode()
    for pair in query.split("&"):
        found.add(pair.partition("=")[2])
    return sorted((s for s in found if len(s) >= 4), key=len, reverse=True)


def _scrub(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def _error_detail(response: httpx.Response) -> str:
    """The endpoint's own explanation, if it gave a short one."""
    try:
        data = response.json()
    except ValueError:
        text = response.text.strip()
        return text[:_DETAIL_LIMIT] if text and not text.startswith("<") else ""
    candidates: list[Any] = []
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            candidates.append(error.get("message"))
        candidates += [error, data.get("message"), data.get("detail")]
    elif isinstance(data, str):
        candidates.append(data)
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()[:_DETAIL_LIMIT]
    return ""


def _status_text(code: int) -> str:
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return str(code)


def _transport_reason(exc: httpx.TransportError, timeout: float) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "the connection could not be made in time"
    if isinstance(exc, httpx.ReadTimeout):
        return f"no answer came within the {timeout:g} s timeout"
    if isinstance(exc, httpx.TimeoutException):
        return f"the request timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"the endpoint could not be reached ({exc or 'connection failed'})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"the connection broke before an answer came ({exc})"
    return f"{type(exc).__name__}: {exc}"


def _reported_tokens(data: Any) -> int | None:
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    total = usage.get("total_tokens")
    if isinstance(total, int):
        return total
    parts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")]
    numbers = [p for p in parts if isinstance(p, int)]
    return sum(numbers) if numbers else None


def _attempts(n: int) -> str:
    return f"{n} attempt" if n == 1 else f"{n} attempts"


async def request_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    body: Any,
    headers: dict[str, str],
    connector: Connector,
    limiter: Limiter,
    tokens: int,
    agent: str,
    text_ok: bool = False,
) -> tuple[httpx.Response, Any]:
    """Send ``body`` as JSON and return the response with its decoded JSON body.

    ``agent`` names the agent in messages. With ``text_ok`` a 2xx body that is
    not JSON comes back as its text; otherwise it is an
    :class:`AgentResponseError`. Raises :class:`AgentHTTPError` for an error
    status and :class:`AgentConnectionError` when no answer came, once retries
    are spent or the failure is not worth retrying.

    The limiter is asked before every attempt and told after it what it cost:
    the tokens the endpoint reported, or ``tokens`` when it may have worked
    without saying (a 2xx without usage, a read timeout, a cancelled request),
    or 0 when it refused.
    """
    timeout = timeout_for(connector)
    attempts = connector.max_retries + 1
    what = f"agent '{agent}' at {method.upper()} {safe_url(url)}"
    secrets = _secrets(connector, headers, url)

    status: int | None = None
    reason = ""
    retry_after: float | None = None
    attempt = 0
    while attempt < attempts:
        attempt += 1
        retryable = False
        retry_after = None
        await limiter.acquire(tokens)
        used = tokens  # until we know better (a cancellation keeps the estimate)
        try:
            try:
                response = await client.request(method, url, json=body, headers=headers, timeout=timeout)
            except _RETRY_TRANSPORT as exc:
                used = tokens if isinstance(exc, httpx.ReadTimeout) else 0
                status, reason, retryable = None, _transport_reason(exc, connector.timeout), True
            except httpx.TransportError as exc:
                used = 0
                status, reason = None, _transport_reason(exc, connector.timeout)
            else:
                if response.is_success:
                    try:
                        data = response.json()
                    except ValueError:
                        if not text_ok:
                            used = 0
                            start = _scrub(response.text[:80], secrets)
                            raise AgentResponseError(
                                f"Cannot read the reply of {what}: the body is not JSON (it starts {start!r})."
                            ) from None
                        data = response.text
                    reported = _reported_tokens(data)
                    used = tokens if reported is None else reported
                    return response, data
                used = 0
                status = response.status_code
                retryable = status in RETRY_STATUSES
                retry_after = _retry_after(response)
                detail = _error_detail(response)
                reason = f"the endpoint answered {_status_text(status)}" + (f" ({detail})" if detail else "")
        finally:
            limiter.release(used)
        if not retryable or attempt >= attempts:
            break
        delay = retry_after if retry_after is not None else backoff_delay(attempt)
        if status == 429:
            limiter.backoff(delay)
        await asyncio.sleep(delay)

    retried = "" if attempt > 1 or status is None or status in RETRY_STATUSES else " (not retried)"
    message = _scrub(f"Cannot get a reply from {what}: {reason}, after {_attempts(attempt)}{retried}.", secrets)
    if status is None:
        raise AgentConnectionError(message)
    raise AgentHTTPError(message, status, retry_after)

