"""The rate-limit seam: every HTTP client asks a :class:`Limiter` before each request.

A client calls, around every request it makes (every retry included)::

    await limiter.acquire(estimate)     # wait for a permit
    ...                                 # the request
    limiter.release(tokens_used)        # what it really cost; never blocks
    limiter.backoff(seconds)            # on 429 / Retry-After: pause the connector

(through :func:`acquire_permit`, so that the wait is not counted as the agent's time).

:class:`NoLimit` lets everything through. The cluster-wide limiter (one per
connector, enforcing rpm, tpm and concurrency) lives with the Ray actors and
plugs in here without the clients knowing about Ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

__all__ = ["Limiter", "NoLimit", "PermitWait", "acquire_permit", "estimate_tokens", "waiting_for_permits"]


@runtime_checkable
class Limiter(Protocol):
    """Permits for one connector's requests."""

    async def acquire(self, tokens: int) -> None:
        """Wait until one request estimated at ``tokens`` tokens may start."""
        ...

    def release(self, tokens_used: int) -> None:
        """The request is over and cost ``tokens_used`` tokens (0 when it was refused). Must not block."""
        ...

    def backoff(self, seconds: float) -> None:
        """The endpoint said "too many requests": start no request on this connector for ``seconds``."""
        ...


class NoLimit:
    """A limiter that never waits."""

    async def acquire(self, tokens: int) -> None:
        return None

    def release(self, tokens_used: int) -> None:
        return None

    def backoff(self, seconds: float) -> None:
        return None

    def __repr__(self) -> str:
        return "NoLimit()"


#: Tokens counted for one non-text content part (an image, a file, audio): its
#: base64 text would count thousands of "tokens" by length, which is wrong.
PART_TOKENS = 256

#: Tokens of framing per message (role, separators), as chat formats add.
MESSAGE_TOKENS = 4


def estimate_tokens(messages: Iterable[dict[str, Any]], max_tokens: int | None = None) -> int:
    """A rough token count for a request: characters / 4 of the text, plus ``max_tokens``.

    Good enough to reserve tokens-per-minute budget before a request; the
    limiter is told the real usage afterwards.
    """
    chars = 0
    parts = 0
    count = 0
    for message in messages:
        count += 1
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, str):
                    chars += len(part)
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
                else:
                    parts += 1
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
    return chars // 4 + parts * PART_TOKENS + count * MESSAGE_TOKENS + (max_tokens or 0)


# -- time spent waiting for permits is not the agent's time ---------------------


class PermitWait:
    """What one turn waited for rate-limit permits, and the timeouts that must not count it.

    The runner opens one around the agent calls of a turn (:func:`waiting_for_permits`);
    while a request waits for its permit the turn's and the case's timeouts are
    paused, and the wait is added to :attr:`seconds` (the turn's ``queued_ms``).
    """

    def __init__(self, timeouts: list[asyncio.Timeout]):
        self.timeouts = timeouts
        self.seconds = 0.0

    async def acquire(self, limiter: Limiter, tokens: int) -> None:
        paused: list[tuple[asyncio.Timeout, float]] = []
        for timeout in self.timeouts:
            when = timeout.when()
            if when is not None and not timeout.expired():
                paused.append((timeout, when))
        for timeout, _ in paused:
            timeout.reschedule(None)
        started = time.perf_counter()
        try:
            await limiter.acquire(tokens)
        finally:
            waited = time.perf_counter() - started
            self.seconds += waited
            for timeout, when in paused:
                timeout.reschedule(when + waited)


_permit_wait: contextvars.ContextVar[PermitWait | None] = contextvars.ContextVar("farm_permit_wait", default=None)


@contextlib.contextmanager
def waiting_for_permits(timeouts: list[asyncio.Timeout]) -> Iterator[PermitWait]:
    """Within this block, :func:`acquire_permit` in this task pauses ``timeouts`` while it waits."""
    wait = PermitWait(timeouts)
    token = _permit_wait.set(wait)
    try:
        yield wait
    finally:
        _permit_wait.reset(token)


async def acquire_permit(limiter: Limiter, tokens: int) -> None:
    """``limiter.acquire(tokens)``, with the wait kept out of the current turn's time and timeouts."""
    wait = _permit_wait.get()
    if wait is None or isinstance(limiter, NoLimit):
        await limiter.acquire(tokens)
    else:
        await wait.acquire(limiter, tokens)
