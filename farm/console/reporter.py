"""The reporter a run prints through: the banner, each case as it ends, the live progress
line and the summary, laid out with the seed's rules and blank lines."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.segment import Segment, Segments
from rich.text import Text

from farm.console.progress import ProgressLine
from farm.console.safe import SafeConsole, neutralise
from farm.console.summary import print_quiet_summary, print_summary
from farm.console.tree import failure_line, passed_line, print_tree
from farm.results import CaseResult, Status
from farm.secrets import scrub_result
from farm.summary import Summary

__all__ = ["ConsoleReporter"]

#: Width of the banner and section rules (the seed's), narrowed to the console.
RULE_WIDTH = 63

LINES_AT_ONCE = 200
"""Passed cases' lines printed in one go at most."""

LINES_EVERY = 0.1
"""Seconds a passed case's line may wait to be printed with the next ones."""


class ConsoleReporter:
    """Prints a run to ``console``: :meth:`header`, :meth:`case` per result, :meth:`summary`.

    ``verbose`` prints every case's tree, passed ones too; ``quiet`` (``-q``) prints no
    banner, one line per case that failed, errored or timed out, and the summary;
    ``stability_rows`` caps the Stability table (the least stable cases come first).
    """

    def __init__(self, console: Console, verbose: bool = False, stability_rows: int = 20, quiet: bool = False) -> None:
        self.console = SafeConsole(console)
        self.verbose = verbose
        self.quiet = quiet
        self.stability_rows = stability_rows
        self._progress = ProgressLine(console)
        self._gap_needed = False  # compact lines were printed since the last blank line
        self._lines: list[Text] = []  # passed cases' lines not printed yet
        self._printed_at = 0.0  # the first line is printed at once
        self.show_agents = False
        """Whether each case names its agent under test: a run that tests several (set by :meth:`header`,
        or on the first result of a second agent)."""
        self._first_agent: str | None = None
        self.show_suites = False
        """Whether each case names its suite: a run of several suites, whose ids may repeat (set on
        the first result of a second suite)."""
        self._first_suite: str | None = None
        self.note_message = False
        """Whether ``-i`` was read as a message: ``-q``'s summary line says so."""

    # -- banner

    def header(
        self,
        agent: str,
        input_desc: str,
        count: int,
        extra: dict[str, str] | None = None,
        agents: Sequence[str] = (),
        generating: bool = False,
        warnings: Sequence[str] = (),
    ) -> None:
        """The banner: agent, input with its case count, any ``extra`` lines, the suite's ``warnings``
        (``-q`` prints those alone), then the "Running Tests" rule.
        ``agents``: every agent under test when the run tests several (each case then names its agent).
        ``generating``: ``count`` cases are being generated (the run starts before they are all there)."""
        self.show_agents = self.show_agents or len(agents) > 1  # -q prints no banner but labels its lines too
        if self.quiet:
            self._warnings(warnings)
            return
        self._section("Agent Test Farm", "═")
        cases = "test case" if count == 1 else "test cases"
        if len(agents) > 1:
            self._info("Agents", ", ".join(agents))
        else:
            self._info("Agent", agent)
        self._info("Input", f"{input_desc} ({'generating ' if generating else ''}{count} {cases})")
        for key, value in (extra or {}).items():
            self._info(key, value)
        self._warnings(warnings)
        self.console.print()
        self._section("Running Tests", "─")
        self.console.print()

    def _warnings(self, warnings: Sequence[str]) -> None:
        for warning in warnings:
            self.console.print(Text.assemble(("warning: ", "yellow"), warning), soft_wrap=True)

    # -- one case

    def case(self, result: CaseResult) -> None:
        """Print one finished case: a line when it passed (unless verbose), else its tree."""
        scrub_result(result)  # already done by the writers' fan-out when it came first; cheap then
        if not self.show_agents:
            if self._first_agent is None:
                self._first_agent = result.agent or ""
            self.show_agents = (result.agent or "") != self._first_agent
        if not self.show_suites:
            if self._first_suite is None:
                self._first_suite = result.suite
            self.show_suites = result.suite != self._first_suite
        if self.quiet:
            if not result.status.ok:
                self.console.print(failure_line(result, self.verbose, self.show_agents, self.show_suites), soft_wrap=True)
                self._gap_needed = True
            return
        if result.status == Status.PASSED and not self.verbose:
            self._lines.append(passed_line(result, self.show_agents, self.show_suites))
            self._gap_needed = True
            if len(self._lines) >= LINES_AT_ONCE or time.monotonic() - self._printed_at >= LINES_EVERY:
                self.flush()
            return
        self.flush()
        self._gap()
        print_tree(self.console, result, self.verbose, self.show_agents, self.show_suites)
        self._gap_needed = False

    def flush(self) -> None:
        """Print the passed cases' lines held back: one print for many lines costs a fraction
        of one print per line (Rich renders per call), which counted at thousands of cases."""
        if self._lines:
            if self.console.color_system is None:
                self._print_plain("\n".join(line.plain for line in self._lines))
            else:
                self.console.print(Text("\n").join(self._lines), soft_wrap=True)
            self._lines.clear()
        self._printed_at = time.monotonic()

    def _print_plain(self, text: str) -> None:
        """``text`` as Rich prints it without colours (not a terminal): neutralised, as it is, and
        a newline. Given as one segment it costs a tenth of the styled lines it was (Rich splits a
        text into a styled text per line); a tab is left to Rich, which expands it."""
        text = neutralise(text)
        if "\t" in text:
            self.console.print(text, soft_wrap=True, markup=False, highlight=False)
        else:
            self.console.raw.print(Segments([Segment(text + "\n")]), soft_wrap=True)

    # -- live progress

    def start_progress(self, total: int, adaptive: bool = False) -> None:
        """Show a transient progress line for ``total`` case runs (terminals only; not with ``quiet``);
        ``adaptive``: ``total`` cases to decide under adaptive repeats (:class:`~farm.console.progress.ProgressLine`)."""
        if self.quiet:
            return
        self._progress.start(total, adaptive)

    def phase(self, text: str) -> None:
        """Say on the progress line what the run is doing ("starting Ray…", "running")."""
        self._progress.phase(text)

    def note(self, text: str) -> None:
        """Say something passing on the progress line (a retry), until the next case ends."""
        self._progress.note(text)

    def advance(self, result: CaseResult) -> None:
        """Count one finished case on the progress line."""
        self._progress.advance(result)

    def generation(self, text: str) -> None:
        """Show how far generation is beside the cases' progress."""
        self._progress.generation(text)

    def progress(self, done: int, total: int | None, counts: dict[str, int]) -> None:
        """Set the progress line to ``done`` of ``total`` with ``counts`` per status value."""
        self._progress.update(done, total, counts)

    def stop_progress(self) -> None:
        """Remove the progress line (printing the lines held back first)."""
        self.flush()
        self._progress.stop()

    # -- summary

    def summary(self, summary: Summary, outputs: Iterable[str] = ()) -> None:
        """The seed's Summary block, a Stability table after ``--runs N``, then ``outputs`` lines;
        with ``quiet``, the table of the cases that were not stable and one line, as pytest ``-q`` ends."""
        self._gap()
        if self.quiet:
            print_quiet_summary(self.console, summary, self.stability_rows, message=self.note_message)
            return
        self._section("Summary", "─")
        print_summary(self.console, summary, self.stability_rows)
        lines = list(outputs)
        if lines:
            self.console.print()
            for line in lines:
                self.console.print(Text(f"  {line}"), soft_wrap=True)

    # -- layout

    def _gap(self) -> None:
        if self._gap_needed:
            self.console.print()
            self._gap_needed = False

    def _section(self, title: str, char: str) -> None:
        bar = char * min(RULE_WIDTH, self.console.width)
        self.console.print(bar, style="dim")
        self.console.print(Text(f"  {title}", style="bold"))
        self.console.print(bar, style="dim")

    def _info(self, key: str, value: str) -> None:
        line = Text("ℹ ", style="blue")
        line.append(f"{key}: {value}")
        self.console.print(line)
