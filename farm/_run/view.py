"""What a run shows on the console, for :func:`farm.run` and :func:`farm.rescore` alike:
the header, a live progress line, each result as it comes, an interrupt, and the summary
with where the outputs went.

:class:`RunView` decides *whether* to show (``quiet``, ``--json``) and *what* the run's
lines are; :class:`~farm.console.ConsoleReporter` draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from farm._run.execution import RunInterrupted
    from farm.console import ConsoleReporter
    from farm.results import CaseResult
    from farm.summary import Summary
    from farm.writers.extra import ReportFile

__all__ = ["RunView"]


class RunView:
    """The console side of one run.

    ``console``: where the tree and the summary go (default: standard output, standard
    error with ``json_events``, whose events own standard output). The header, the
    tree, the progress line and the summary show unless ``json_events``; ``quiet``
    (``-q``) shows one line per case that did not pass and the summary.
    """

    def __init__(self, console: Console | None = None, *, json_events: bool = False, quiet: bool = False, verbose: bool = False):
        self.console = console if console is not None else Console(stderr=json_events, highlight=False)
        self.quiet = quiet
        self.show = not json_events
        self.verbose = verbose
        self._reporter: ConsoleReporter | None = None

    @property
    def reporter(self) -> ConsoleReporter:
        """The reporter that draws; made on first use, so a dry run never imports it."""
        if self._reporter is None:
            from farm.console import ConsoleReporter

            self._reporter = ConsoleReporter(self.console, verbose=self.verbose, quiet=self.quiet)
        return self._reporter

    def start(
        self,
        agents: str | list[str],
        input: str,
        cases: int,
        extra: dict[str, str],
        total: int,
        progress: bool = True,
        generating: bool = False,
        message: bool = False,
        adaptive: bool = False,
        warnings: Sequence[str] = (),
    ) -> None:
        """The header (the agent or agents under test, input, ``extra`` lines), then a progress line
        over ``total`` case runs unless ``progress`` is False (interactive questions would be drawn over).
        ``generating``: ``cases`` is how many the generator is asked for (none is there yet);
        ``message``: the input was read as a message, not a path (the header and ``-q``'s line say so);
        ``adaptive``: ``total`` is the cases to decide under adaptive repeats, and the line counts them;
        ``warnings``: what the suite wrote that the run ignores (``farm validate`` says it too), a line each."""
        if not self.show:
            return
        several = [agents] if isinstance(agents, str) else agents
        self.reporter.note_message = message
        shown = f"message {input!r}" if message else input
        self.reporter.header(
            ", ".join(several), shown, cases, extra, agents=several if len(several) > 1 else (), generating=generating, warnings=warnings
        )
        if progress:
            self.reporter.start_progress(total, adaptive)
            from farm.agents.retry import add_retry_listener

            add_retry_listener(self._retrying)

    def _retrying(self, agent: str, retry: int, retries: int, why: str) -> None:
        """A call of this process waits to be sent again: the progress line says so."""
        self.reporter.note(f"{agent}: retry {retry}/{retries} after {why}")

    def phase(self, text: str) -> None:
        """Say on the progress line what the run waits for (``starting Ray…``)."""
        if self.show:
            self.reporter.phase(text)

    def generation(self, text: str) -> None:
        """Say on the progress line how far generation is (``generated 340/1000``)."""
        if self.show:
            self.reporter.generation(text)

    def result(self, result: CaseResult) -> None:
        """One finished case run: counted on the progress line, printed as a line or a tree (not a
        case that ended on an unreachable endpoint: the run ends with that sentence, once)."""
        if self.show:
            self.reporter.advance(result)
            if result.ended_by != "unreachable":
                self.reporter.case(result)

    def stop(self) -> None:
        """Remove the progress line, printing the lines it held back."""
        from farm.agents.retry import remove_retry_listener

        remove_retry_listener(self._retrying)
        if self._reporter is not None:
            self._reporter.stop_progress()

    def interrupted(self, stop: RunInterrupted, done: str, resume: str | None = None) -> None:
        """Ctrl-C or SIGTERM ended the run: how many case runs were ``done``, and how to ``resume``."""
        self.stop()
        self.console.print(
            f"\n[yellow]Interrupted[/yellow]: {stop.done} of {stop.total} case runs {done}; their results are kept.",
            soft_wrap=True,
            emoji=False,
        )
        if resume is not None:
            self.console.print(f"Resume with: {resume}", soft_wrap=True, markup=False)

    def summary(self, summary: Summary, lines: Sequence[str], reports: Sequence[ReportFile] = ()) -> None:
        """The summary block, then ``lines`` (where the results went), the rescore's cases it could
        not judge, and the report files."""
        self.stop()
        if not self.show:
            return
        outputs = list(lines)
        if summary.not_rescorable:
            outputs.append(
                f"{summary.not_rescorable} not rescorable: their inputs changed or they need turns the run did not record; rerun them with farm test"
            )
        outputs += [f"{report.label}: {report.path}" for report in reports]
        self.reporter.summary(summary, outputs)
