"""A generator script as a source of cases: ``-i scripts:<module.fn>`` calls the function once
with what a generator is told, and takes what it returns or yields (a list of cases, a dict of
``cases``, or one case) as batches. A generator's items are fetched in a thread, so a slow script
blocks no conversation; an item larger than a reply may be (``max_reply_bytes``) ends it."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from farm.secrets import process_scrubber

if TYPE_CHECKING:
    from farm.generation.intake import Intake, OnProblem
    from farm.generation.query import Settings
    from farm.loaded import LoadedCase

__all__ = ["ScriptBatches"]


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


_END = object()


async def _items(produced: Any) -> AsyncIterator[Any]:
    """What a script generator produced, item by item: an async generator's, a generator's
    (each ``next`` in a thread, so a slow script blocks no conversation), or one value."""
    try:
        if inspect.isasyncgen(produced):
            async for item in produced:
                yield item
        elif inspect.isgenerator(produced):
            while (item := await asyncio.to_thread(next, produced, _END)) is not _END:
                yield item
        else:
            yield produced
    except Exception as exc:
        yield _Failure(exc)


async def _close(produced: Any) -> None:
    if inspect.isasyncgen(produced):
        await produced.aclose()
    elif inspect.isgenerator(produced):
        produced.close()


def _within(value: Any, limit: int) -> bool:
    """Whether ``value`` (what a script produced) takes at most ``limit`` bytes as JSON, about;
    counted without writing it out, and stopping as soon as it is over."""
    used = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            used += len(item) + 2 if item.isascii() else len(item.encode("utf-8", "replace")) + 2
        elif isinstance(item, dict):
            used += 2 + 2 * len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            used += 2 + len(item)
            stack.extend(item)
        else:
            used += 8
        if used > limit:
            return False
    return True


class ScriptBatches:
    """What the generator function ``script`` produces, taken in by ``intake``."""

    def __init__(self, intake: Intake, settings: Settings, script: Callable[..., Any], max_reply_bytes: int):
        self.intake = intake
        self.settings = settings
        self.script = script
        self.max_reply_bytes = max_reply_bytes

    def _failed(self, exc: BaseException) -> None:
        self.intake.error = process_scrubber().scrub(f"the generator script failed: {type(exc).__name__}: {exc}")
        self.intake.stop(self.intake.error)

    def _ends(self, error: str) -> None:
        self.intake.error = error
        self.intake.stop(error)

    async def cases(self, on_problem: OnProblem) -> AsyncIterator[list[LoadedCase]]:
        """The accepted cases of each item the script produces."""
        intake, settings = self.intake, self.settings
        metadata = {**settings.metadata, "slice": {}, **{k: v for k, v in settings.coverage.items()}}
        try:
            produced = self.script(metadata)
            if inspect.isawaitable(produced):
                produced = await produced
        except Exception as exc:
            self._failed(exc)
            return
        verb = "yielded" if inspect.isgenerator(produced) or inspect.isasyncgen(produced) else "returned"
        number = streak = 0
        async for item in _items(produced):
            if isinstance(item, _Failure):
                self._failed(item.exc)
                return
            number += 1
            intake.stats.batches += 1
            if not _within(item, self.max_reply_bytes):
                self._ends(f"the generator script {verb} more than {self.max_reply_bytes} bytes at once (the bound of a reply, max_reply_bytes)")
                await _close(produced)
                return
            cases = item
            if isinstance(cases, dict) and isinstance(cases.get("cases"), list):
                cases = cases["cases"]
            if not isinstance(cases, list):
                if not isinstance(cases, dict):
                    self._ends(f"the generator script {verb} {type(cases).__name__}, not cases")
                    return
                cases = [cases]
            accepted = intake.take(cases, number, None, on_problem)
            streak = 0 if accepted else streak + len(cases)
            yield accepted
            if intake.full:
                await _close(produced)
                return
            if streak >= settings.patience * settings.batch:  # a script that repeats itself forever still ends
                intake.stop(f"the last {streak} cases the script yielded added no new valid case")
                await _close(produced)
                return
