"""The live progress line: a transient line on a terminal, counting the run's cases as they end."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from farm.results import CaseResult, Status

__all__ = ["ProgressLine"]

_FAILING = (Status.FAILED, Status.ERROR, Status.TIMEOUT)
"""The statuses the line counts as failed."""


class ProgressLine:
    """Spinner, phase, bar, cases done of the total, passed and failed, elapsed time and ETA.

    Drawn on terminals only (elsewhere every method still counts, and draws nothing). What
    it counts is display state of this part of the run: the run's tally, earlier parts
    included, is the :class:`~farm.summary.Summary` that ``execute`` keeps.

    Under adaptive repeats the number of tries is not known ahead (a decided case stops early), so
    the bar counts cases decided of those to decide, and says the tries made beside it: counting
    tries against each case's most would end a run well short of its total.
    """

    def __init__(self, console: Console) -> None:
        self._console = console
        self._progress: Progress | None = None
        self._task: Any = None
        self.done = 0
        """Cases counted since :meth:`start`."""
        self.counts: dict[str, int] = {}
        """Of them, how many ended with each status value."""
        self.tries = 0
        """Case runs counted since :meth:`start` (``done`` counts cases decided under adaptive repeats)."""
        self._noted = False
        self._adaptive = False
        self._ended: set[tuple[str, str]] = set()

    def start(self, total: int, adaptive: bool = False) -> None:
        """Count from zero, and show the line for ``total`` case runs when the console is a terminal;
        ``adaptive``: for ``total`` cases to decide, each counted when its tries end (class docstring)."""
        self.done, self.counts, self.tries, self._adaptive, self._ended = 0, {}, 0, adaptive, set()
        if not self._console.is_terminal or self._progress is not None:
            return
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.fields[phase]}"),
            TextColumn("{task.fields[generation]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TextColumn("[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/]"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        unit = self._unit()
        self._task = self._progress.add_task("cases", total=total, passed=0, failed=0, phase="Running", generation="", unit=unit)
        self._progress.start()

    def phase(self, text: str) -> None:
        """Say what the run is doing ("starting Ray…", "running")."""
        if self._progress is not None:
            self._progress.update(self._task, phase=escape(text[:1].upper() + text[1:]))

    def generation(self, text: str) -> None:
        """Show how far generation is (``generated 340/1000``) beside the cases' progress; ``""``
        when it has ended."""
        if self._progress is not None:
            self._progress.update(self._task, generation=escape(text))

    def note(self, text: str) -> None:
        """Say something passing in the phase column (``judge: retry 3/5 after connection refused``)
        until the next case ends."""
        if self._progress is not None:
            self._progress.update(self._task, phase=escape(text))
            self._noted = True

    def _unit(self) -> str:
        """What the count beside the bar is of: under adaptive repeats, cases decided, and the tries."""
        return f"cases decided, {self.tries} {'try' if self.tries == 1 else 'tries'}" if self._adaptive else ""

    def advance(self, result: CaseResult) -> None:
        """Count one finished case run: under adaptive repeats, the case when it is the last of its tries
        (the rule stopped it, or it was skipped: a skipped case is not tried again)."""
        self.tries += 1
        if not self._adaptive:
            self.done += 1
        elif result.stopped is not None or result.status == Status.SKIPPED:
            key = (result.agent or "", result.id)
            self.done += key not in self._ended
            self._ended.add(key)
        status = Status(result.status).value
        self.counts[status] = self.counts.get(status, 0) + 1
        if self._noted and self._progress is not None:
            self._noted = False
            self._progress.update(self._task, phase="Running")
        self.update(self.done, None, self.counts)

    def update(self, done: int, total: int | None, counts: dict[str, int]) -> None:
        """Show ``done`` of ``total`` (None: unchanged) with ``counts`` per status value."""
        if self._progress is None:
            return
        failed = sum(counts.get(status.value, 0) for status in _FAILING)
        self._progress.update(
            self._task, completed=done, total=total, passed=counts.get(Status.PASSED.value, 0), failed=failed, unit=self._unit()
        )

    def stop(self) -> None:
        """Remove the line."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None
