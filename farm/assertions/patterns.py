"""User regexes, run so that a runaway one fails on its own and holds up nothing else.

Every pattern a test writes (the ``regex`` assertion, ``regex:`` strings in a
``tool_result``) is searched here, with the ``regex`` package in its default
V0 mode, which follows the syntax and semantics of Python's ``re``. Two things
``re`` cannot do make it the right tool:

- ``timeout``: a search that backtracks catastrophically (``(a+)+$`` against
  ``"a" * 40 + "!"``) stops after the time it is given, with ``TimeoutError``;
- ``concurrent=True``: it releases the GIL while it matches, so a search in a
  worker thread does not stall the event loop other conversations share.

A search first runs inline for at most :data:`INLINE_SECONDS` (almost every
pattern finishes in microseconds, and a thread hop would cost more); one that
needs longer moves to a thread of this module's own pool for the rest of its
time, so runaway patterns never fill the pool other ``to_thread`` work uses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from farm.errors import InvalidPattern, PatternTimeout

__all__ = [
    "DEFAULT_LIMIT",
    "INLINE_SECONDS",
    "InvalidPattern",
    "PatternTimeout",
    "compile_pattern",
    "limit_for",
    "off_loop",
    "search",
    "search_blocking",
]

DEFAULT_LIMIT = 10.0
"""Longest a single pattern may search, in seconds, when the turn timeout does not say less."""

INLINE_SECONDS = 0.02
"""How long a search may hold the event loop before it moves to a thread."""

_T = TypeVar("_T")

_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="farm-regex")


def limit_for(time_limit: float | None) -> float:
    """Seconds one search may take: the turn's time limit, capped at :data:`DEFAULT_LIMIT`."""
    return DEFAULT_LIMIT if not time_limit or time_limit <= 0 else min(time_limit, DEFAULT_LIMIT)


def compile_pattern(pattern: str, ignore_case: bool = False) -> Any:
    """``pattern`` compiled in V0 (``re``-compatible) mode; :class:`InvalidPattern` for bad syntax."""
    import regex  # with the first pattern: a suite without one never loads the package (~6 ms)

    try:
        return regex.compile(pattern, regex.V0 | (regex.IGNORECASE if ignore_case else 0))
    except regex.error as exc:
        raise InvalidPattern(str(exc)) from None


def search_blocking(pattern: str, text: str, *, ignore_case: bool = False, limit: float = DEFAULT_LIMIT) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``, in this thread; :class:`PatternTimeout` past ``limit``.

    For callers already off the event loop (a worker thread).
    """
    compiled = compile_pattern(pattern, ignore_case)
    try:
        return compiled.search(text, timeout=limit, concurrent=True) is not None
    except TimeoutError:
        raise PatternTimeout(pattern, limit) from None


async def search(pattern: str, text: str, *, ignore_case: bool = False, limit: float = DEFAULT_LIMIT) -> bool:
    """Whether ``pattern`` matches somewhere in ``text``, never blocking the loop for long.

    Raises :class:`InvalidPattern` for a bad pattern and :class:`PatternTimeout` when
    the search runs past ``limit`` seconds.
    """
    compiled = compile_pattern(pattern, ignore_case)
    limit = max(limit, 0.001)
    started = time.monotonic()
    try:
        return compiled.search(text, timeout=min(INLINE_SECONDS, limit), concurrent=True) is not None
    except TimeoutError:
        pass
    left = limit - (time.monotonic() - started)
    if left <= 0:
        raise PatternTimeout(pattern, limit)
    try:
        found = await off_loop(lambda: compiled.search(text, timeout=left, concurrent=True), left)
    except TimeoutError:
        raise PatternTimeout(pattern, limit) from None
    return found is not None


async def off_loop(fn: Callable[[], _T], limit: float) -> _T:
    """``fn()`` in this module's thread pool, waited for at most ``limit`` seconds (plus a little).

    ``fn`` must stop by itself (its searches carry a ``timeout``); the wait is
    bounded too, so a call queued behind busy threads cannot hang a turn.
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(limit + 1.0):
        return await loop.run_in_executor(_POOL, fn)
