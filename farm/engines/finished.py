"""The results of cases that ended, on their way from an engine to the run's writers.

Both engines keep them in :class:`Finished` until they record them, and an interrupt never
cuts a step in two (:func:`~farm.interrupts.uninterrupted`): a case's result comes in with the
step that takes the case off the engine's books, and goes out with the step that records it.
So an interrupt neither loses a case that ran nor records one twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from farm.interrupts import uninterrupted
from farm.results import CaseResult

__all__ = ["Finished"]


class Finished:
    """Results not yet handed to ``on_result``, in the order their cases ended."""

    def __init__(self, on_result: Callable[[CaseResult], None], results: Iterable[CaseResult] = ()):
        self._results: deque[CaseResult] = deque(results)
        self._on_result = on_result

    def __bool__(self) -> bool:
        return bool(self._results)

    def add(self, results: Iterable[CaseResult]) -> None:
        self._results.extend(results)

    def take(self, settle: Callable[[Any], Iterable[CaseResult]], *items: Any) -> None:
        """Add the results ``settle(item)`` returns for each item, each in one step with its call."""
        for item in items:
            with uninterrupted():
                self._results.extend(settle(item))

    def record_one(self) -> None:
        with uninterrupted():
            self._on_result(self._results.popleft())

    def record_all(self) -> None:
        while self._results:
            self.record_one()
