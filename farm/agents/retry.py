"""How the HTTP clients make one request: timeouts, rate-limit permits and retries.

Retried, up to ``connector.max_retries`` times after the first attempt:

- status 408, 429, 500, 502, 503, 504;
- the endpoint could not be reached (connect errors and timeouts), a read
  timed out, or the connection broke before an answer came.

A 2xx reply larger than ``connector.max_reply_bytes`` (decompressed) is an
:class:`AgentReplyTooLargeError` at once, not retried: reading stops there.

The wait before a retry is the endpoint's ``Retry-After`` (seconds or an HTTP
date; ``retry-after-ms`` too), capped at :data:`RETRY_AFTER_CAP`, else
exponential backoff with jitter (:data:`BACKOFF_BASE` doubling up to
:data:`BACKOFF_CAP`; for a 429, :data:`RATE_LIMIT_BASE` doubling up to
:data:`RATE_LIMIT_CAP`, so the retries span a per-minute window). Every 429
also pauses the whole connector through :meth:`Limiter.backoff`. Any other
status is final at once.

A connector that has never answered in this process and whose requests keep
failing to connect (:data:`UNREACHABLE_FAILURES` of them, failures over
:data:`UNREACHABLE_SECONDS`, or a request's every attempt, so a suite smaller
than the burst gets the same verdict) is taken for one where nothing listens: the
request raises :class:`EndpointUnreachable` at once, without waiting out its
retries, and a later request to it makes one attempt, not its retries (a
refused connection costs a millisecond; a server started since answers it);
the run stops on it (:class:`Reachability`). One answer, of any status, clears it.

Error messages say what was attempted, what blocked it and after how many
attempts. They never carry request headers, and the API key, the connector's
secret-looking header values and the URL's query string are scrubbed from
anything an endpoint echoes back.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from email.utils import parsedate_to_datetime
from functools import lru_cache
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from farm.agents.base import (
    AgentConnectionError,
    AgentError,
    AgentHTTPError,
    AgentReplyTooLargeError,
    AgentResponseError,
    AgentTimeoutError,
)
from farm.agents.permits import Limiter, acquire_permit
from farm.agents.transport import HTTPClient, HTTPReply, ReplyTooLarge, TransportError
from farm.config import Connector
from farm.errors import EndpointUnreachable
from farm.excerpts import clip
from farm.secrets import Scrubber, header_secrets, url_secrets
from farm.traces.parent import TRACEPARENT

__all__ = [
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "RATE_LIMIT_BASE",
    "RATE_LIMIT_CAP",
    "RETRY_AFTER_CAP",
    "RETRY_STATUSES",
    "UNREACHABLE_FAILURES",
    "UNREACHABLE_SECONDS",
    "Reachability",
    "Retrying",
    "Sleep",
    "add_retry_listener",
    "backoff_delay",
    "parse_retry_after",
    "remove_retry_listener",
    "request_json",
    "safe_url",
    "with_retries",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

Retrying = Callable[[str, int, int, str], None]
"""Told ``(agent, retry, retries, why)`` as a call waits to be sent again: ``("judge", 3, 5,
"connection refused")``. Called on the event loop of the call; it must not block."""

_listeners: list[Retrying] = []


def add_retry_listener(listener: Retrying) -> None:
    """Tell ``listener`` of every retry of an agent or role call in this process (the console's
    progress line says so, instead of sitting silent through the backoff)."""
    _listeners.append(listener)


def remove_retry_listener(listener: Retrying) -> None:
    """Stop telling ``listener``."""
    if listener in _listeners:
        _listeners.remove(listener)


def _retrying(agent: str, retry: int, retries: int, status: int | None, reason: str, timed_out: bool) -> None:
    if not _listeners:
        return
    if status is not None:
        why = _status_text(status)
    elif timed_out:
        why = "a timeout"
    elif "refused" in reason.lower():
        why = "connection refused"
    else:
        why = "a connection error"
    for listener in list(_listeners):
        try:
            listener(agent, retry, retries, why)
        except Exception:  # the console's trouble is never the call's
            pass

BACKOFF_BASE = 0.5
"""Seconds before the first retry of a 5xx or a connection error (then doubling)."""

BACKOFF_CAP = 30.0
"""Longest wait between two attempts without a Retry-After."""

RATE_LIMIT_BASE = 4.0
"""Seconds before the first retry of a 429 that names no Retry-After (then doubling).

Rate limits are per minute: with the default 5 retries the waits (half fixed,
half jitter) add up to 60-120 s, so the retries outlast the window instead of
spending themselves within a few seconds of it, as they did at 0.5 s."""

RATE_LIMIT_CAP = 60.0
"""Longest wait between two attempts after a 429 without a Retry-After."""

RETRY_AFTER_CAP = 60.0
"""Longest wait honoured from a Retry-After header."""

CONNECT_TIMEOUT_CAP = 10.0
"""Reaching a host takes seconds, not the minute an LLM may need to answer."""

_DETAIL_LIMIT = 200

# One encoder for every body: json.dumps with an option builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False)

UNREACHABLE_FAILURES = 10
"""Failed connections, none ever answered, after which a connector is taken for unreachable:
a burst of cases against a port where nothing listens."""

UNREACHABLE_SECONDS = 2.0
"""Seconds of failed connections (two at least), none ever answered, after which a connector
is taken for unreachable: one case retrying against it."""


class Reachability:
    """Whether each connector of this process has ever answered, and the verdict on one that
    never has while its connections keep failing (see the module's docstring).

    Per process: on Ray each session actor judges for itself, and the driver learns it
    from the results (:attr:`~farm.results.CaseResult.ended_by` ``unreachable``).
    ``clock``: seconds, monotonic (a test passes its own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._answered: set[str] = set()
        self._failures: dict[str, tuple[int, float]] = {}
        """Per connector never answered: failed connections, and when the first failed."""
        self._verdicts: set[str] = set()
        """The connectors judged unreachable."""

    def answered(self, key: str) -> None:
        """An answer came (any status): the endpoint is there."""
        self._answered.add(key)
        self._failures.pop(key, None)
        self._verdicts.discard(key)

    def judged(self, key: str) -> bool:
        """Whether ``key`` is judged unreachable (until it answers)."""
        return key in self._verdicts

    def failed(self, key: str, spent: bool = False) -> bool:
        """A connection to ``key`` could not be made; returns whether it is (now) judged unreachable.
        ``spent``: it was the request's last attempt (a request that never connected, retries and all)."""
        if key in self._answered:
            return False
        now = self.clock()
        count, first = self._failures.get(key, (0, now))
        count += 1
        self._failures[key] = (count, first)
        if key in self._verdicts or spent or count >= UNREACHABLE_FAILURES or (count >= 2 and now - first >= UNREACHABLE_SECONDS):
            self._verdicts.add(key)
            return True
        return False

    def failures(self, key: str) -> int:
        """Failed connections to ``key`` counted towards the verdict."""
        return self._failures.get(key, (0, 0.0))[0]


_reachability = Reachability()


def _unreachable(connector: Connector, key: str) -> EndpointUnreachable:
    count = _reachability.failures(key)
    return EndpointUnreachable(
        f"connector '{connector.name}' at {safe_url(connector.base_url)} cannot be reached: "
        f"{count} connection{'s' if count != 1 else ''} failed and none was ever answered; is the agent running there?"
    )

Sleep = Callable[[float], Awaitable[None]]
"""How :func:`request_json` waits between attempts: :func:`asyncio.sleep`, or a test's fake."""


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


def _retry_after(response: HTTPReply) -> float | None:
    millis = response.headers.get("retry-after-ms")
    if millis is not None:
        try:
            seconds = float(millis) / 1000.0  # not through parse_retry_after: its cap is in seconds
        except ValueError:
            seconds = math.nan
        if seconds == seconds:  # not NaN
            return min(max(seconds, 0.0), RETRY_AFTER_CAP)
    return parse_retry_after(response.headers.get("retry-after"))


def backoff_delay(attempt: int, *, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based): half fixed, half jitter."""
    ceiling = min(cap, base * 2 ** (attempt - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


@lru_cache(maxsize=256)  # every request names its URL for a message it may need
def safe_url(url: str) -> str:
    """The URL without credentials, query or fragment, fit for a message."""
    parts = urlsplit(str(url))
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _secrets(connector: Connector, headers: dict[str, str], url: str) -> Scrubber:
    """What an error message about this request must not hold: the key, secret headers, the query's values."""
    found = {connector.api_key() or ""} | header_secrets(headers)
    query = urlsplit(url).query
    found.update(pair.partition("=")[2] for pair in query.split("&"))  # as sent
    found.update(value for _, value in parse_qsl(query, keep_blank_values=True))  # as decoded
    found.update(url_secrets(url))
    return Scrubber(found, min_length=4)


class _ErrorScrubber:
    """``_secrets(connector, headers, url)``, built on the first call (only an error needs it:
    ~60 µs with a key) and kept; a ``functools.cache`` around a ``partial`` costs a few µs a request."""

    __slots__ = ("_args", "_scrubber")

    def __init__(self, connector: Connector, headers: dict[str, str], url: str):
        self._args = (connector, headers, url)
        self._scrubber: Scrubber | None = None

    def __call__(self) -> Scrubber:
        if self._scrubber is None:
            self._scrubber = _secrets(*self._args)
        return self._scrubber


def _error_detail(response: HTTPReply, scrubber: Scrubber) -> str:
    """The endpoint's own explanation, if it gave a short one; scrubbed *before* it is cut,
    so a key the endpoint echoes near the cut cannot leave a piece behind."""
    try:
        data = response.json()
    except ValueError:
        text = response.text.strip()
        return clip(scrubber.scrub(text), _DETAIL_LIMIT, within=False) if text and not text.startswith("<") else ""
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
            return clip(scrubber.scrub(candidate.strip()), _DETAIL_LIMIT, within=False)
    return ""


def _status_text(code: int) -> str:
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return str(code)


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


def _size(n: int) -> str:
    """Bytes as a person reads them: ``10 MB``, ``1.5 MB``, ``64000 bytes``."""
    return f"{n / 1e6:g} MB" if n >= 1_000_000 else f"{n} bytes"


def _requests(n: int) -> str:
    # "request", not "attempt": a case's own attempts (--retries, a lost worker) are another count
    return f"{n} request" if n == 1 else f"{n} requests"


async def request_json(
    client: HTTPClient,
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
    sleep: Sleep = asyncio.sleep,
) -> tuple[HTTPReply, Any, int]:
    """Send ``body`` as JSON and return the response, its decoded JSON body and how many retries it took.

    ``agent`` names the agent in messages. With ``text_ok`` a 2xx body that is
    not JSON comes back as its text; otherwise it is an
    :class:`AgentResponseError`. Raises :class:`AgentHTTPError` for an error
    status and :class:`AgentConnectionError` when no answer came, once retries
    are spent or the failure is not worth retrying;
    :class:`AgentReplyTooLargeError` when a 2xx body is larger than
    ``connector.max_reply_bytes``.

    The limiter is asked before every attempt and told after it what it cost:
    the tokens the endpoint reported, or ``tokens`` when it may have worked
    without saying (a 2xx without usage, a read timeout, a cancelled request),
    or 0 when it refused.

    ``sleep`` waits between attempts (a test passes one that records the delays).
    """
    reach = f"{connector.name} {urlsplit(url).netloc}"
    attempts = 1 if _reachability.judged(reach) else connector.max_retries + 1  # judged: one attempt, no retries
    what = f"agent '{agent}' at {method.upper()} {safe_url(url)}"
    secrets = _ErrorScrubber(connector, headers, url)
    payload = _ENCODER.encode(body).encode()
    if not any(name.lower() == "content-type" for name in headers):
        headers = {**headers, "Content-Type": "application/json"}
    parent = TRACEPARENT.get()
    if parent is not None:  # a traced turn: the agent's spans join its case run's trace
        headers = {**headers, "traceparent": parent}
    connect_timeout = min(connector.timeout, CONNECT_TIMEOUT_CAP)

    status: int | None = None
    reason = ""
    timed_out = False
    retry_after: float | None = None
    attempt = 0
    while attempt < attempts:
        attempt += 1
        retryable = False
        retry_after = None
        await acquire_permit(limiter, tokens)
        used = tokens  # until we know better (a cancellation keeps the estimate)
        try:
            try:
                response = await client.request(
                    method,
                    url,
                    body=payload,
                    headers=headers,
                    timeout=connector.timeout,
                    connect_timeout=connect_timeout,
                    max_reply_bytes=connector.max_reply_bytes,
                )
            except ReplyTooLarge as exc:  # the endpoint did the work: the estimate stays
                too_large = AgentReplyTooLargeError(f"The reply of {what} is larger than max_reply_bytes ({_size(exc.limit)}); stopped reading.")
                raise with_retries(too_large, attempt - 1) from None
            except TransportError as exc:
                used = tokens if exc.maybe_served else 0
                status, reason, retryable, timed_out = None, exc.reason, exc.retryable, exc.timed_out
                if not exc.connect_failed:
                    _reachability.answered(reach)  # connected: something listens there
                elif _reachability.failed(reach, spent=attempt >= attempts):
                    raise _unreachable(connector, reach) from None
            else:
                _reachability.answered(reach)
                if response.ok:
                    try:
                        data = response.json()
                    except ValueError:
                        if not text_ok:
                            used = 0
                            start = clip(secrets().scrub(response.text), 80, within=False)
                            unread = AgentResponseError(f"Cannot read the reply of {what}: the body is not JSON (it starts {start!r}).")
                            raise with_retries(unread, attempt - 1) from None
                        data = response.text
                    reported = _reported_tokens(data)
                    used = tokens if reported is None else reported
                    return response, data, attempt - 1
                used = 0
                timed_out = False
                status = response.status
                retryable = status in RETRY_STATUSES
                retry_after = _retry_after(response)
                detail = _error_detail(response, secrets())
                reason = f"the endpoint answered {_status_text(status)}" + (f" ({detail})" if detail else "")
        finally:
            limiter.release(used)
        if not retryable or attempt >= attempts:
            break
        if retry_after is not None:
            delay = retry_after
        elif status == 429:
            delay = backoff_delay(attempt, base=RATE_LIMIT_BASE, cap=RATE_LIMIT_CAP)
        else:
            delay = backoff_delay(attempt)
        if status == 429:
            limiter.backoff(delay)
        _retrying(agent, attempt, attempts - 1, status, reason, timed_out)
        await sleep(delay)

    retried = "" if attempt > 1 or status is None or status in RETRY_STATUSES else " (not retried)"
    message = secrets().scrub(f"Cannot get a reply from {what}: {reason}, after {_requests(attempt)}{retried}.")
    if status is None:
        raise with_retries((AgentTimeoutError if timed_out else AgentConnectionError)(message), attempt - 1)
    raise with_retries(AgentHTTPError(message, status, retry_after), attempt - 1)


def with_retries(error: AgentError, retries: int) -> AgentError:
    """``error``, saying how many requests were repeated before it (a turn records them)."""
    error.retries = retries
    return error
