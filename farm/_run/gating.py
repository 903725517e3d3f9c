"""A run's gate, around :mod:`farm.gate`: the baseline found and read before anything runs (a
bad one is a usage error), the gate decided once every result is in (``run.json`` records it),
and after the run said as the console summary's last lines and appended to
``$GITHUB_STEP_SUMMARY`` as Markdown."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from farm.errors import UsageError
from farm.gate import (
    Baseline,
    CaseTally,
    Tallies,
    adaptive_said,
    case_label,
    find_baseline,
    gate_exit_code,
    judge,
    read_baseline,
    several_suites,
    summary_tallies,
)
from farm.sequential import stop_said

if TYPE_CHECKING:
    from farm._run.request import ResolvedOptions
    from farm._run.view import RunView
    from farm.summary import Summary
    from farm.writers.runinfo import RunGate, RunInfo

__all__ = ["check_in_common", "deciding", "gate_lines", "load_baseline", "show_gate"]


def load_baseline(asked: str | None, results_dir: Path, input: Sequence[str], run_dir: Path) -> Baseline | None:
    """The baseline run ``--baseline`` asked for (None when none was, or ``last`` found none yet)."""
    if not asked:
        return None
    path = find_baseline(asked, results_dir, input, exclude=run_dir)
    if path is not None and path.resolve() == run_dir.resolve():
        raise UsageError(f"--baseline: {asked} is the run being resumed; compare with an earlier run")
    return read_baseline(path, run_dir) if path is not None else None


def check_in_common(asked: str, baseline: Baseline, info: RunInfo, cases: Iterable[tuple[str, str]]) -> None:
    """A baseline run named by its folder (``asked``) that ran none of this run's ``cases`` (each its
    ``source`` and id, all known at the start) is a :class:`UsageError` before any agent call: no case
    could be compared, and the gate would pass on nothing. Suites are worked out as each run's reader
    does (``s.jsonl`` and its absolute path are one suite); ``info``: this run's ``run.json`` as it starts."""
    from farm.results import RunRecord
    from farm.results._suites import Suites

    before_suite = RunRecord(baseline.path).suite_of
    before = {(before_suite(case.source), key[1]) for tallied in baseline.tallies.values() for key, case in tallied.items()}
    now_suite = Suites(info, lambda folder: None).of
    now = {(now_suite(source), case_id) for source, case_id in cases}
    if now and not now & before:
        raise UsageError(
            f"--baseline {asked}: baseline run {baseline.run_id} ran none of the cases of this run's suite "
            f"{info.input}, so nothing could be compared; give a run of the same suite"
        )


def deciding(options: ResolvedOptions, baseline: Baseline | None) -> Callable[[Summary, str | None, int], RunGate]:
    """What decides the gate of a run with ``options`` from its whole :class:`~farm.summary.Summary`,
    why it stopped early if it did, and the case runs that did not run
    (:attr:`farm._run.execution.RunOutputs.gate`)."""
    rate = options.min_pass_rate

    def decide(summary: Summary, stopped: str | None, not_run: int) -> RunGate:
        early = (
            stopped if not_run or stopped == "interrupted" else None
        )  # a stop after the last case left nothing out; an interrupt exits 130 anyway
        return judge(summary_tallies(summary), rate, baseline, options.baseline, early, not_run)

    return decide


def show_gate(summary: Summary, info: RunInfo, view: RunView, asked: bool = True, refused: bool = False) -> int:
    """Say the gate ``info`` holds as the summary's last lines (when ``asked``: a pass rate, a
    baseline or repeats were, or when the run stopped early; else the summary has said it all;
    never for a run ``refused`` at the start, whose one sentence says it) and write the step summary; the exit code it gives (0 passed, 1 failed; without a gate, the
    summary's)."""
    gate = info.gate
    if gate is None:
        return summary.exit_code
    tallies = summary_tallies(summary)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        from farm.reports.markdown import append_step_summary, gate_markdown

        try:
            written = append_step_summary(gate_markdown(info, gate, tallies, summary.blames))
        except OSError as exc:  # the farm could not do its part: said, and never a green run
            view.console.print(
                Text(f"error: cannot append the summary to $GITHUB_STEP_SUMMARY: {exc}", style="red"), soft_wrap=True
            )
            return 1
        if written is not None and view.show and not view.quiet:
            view.console.print(Text(f"Step summary: {written}"), soft_wrap=True)
    if (
        view.show and not refused and (asked or gate.stopped or gate.not_run)
    ):  # -q too: the verdict is the last line, after pytest's
        for line in gate_lines(gate, tallies):
            view.console.print(line, soft_wrap=True)
    return gate_exit_code(gate)


def gate_lines(gate: RunGate, tallies: Tallies) -> list[Text]:
    """The cases that passed their gate while failing some tries, those below it when the run
    repeated them, then the verdict's sentence: the summary's last lines, ``-q`` included. A case
    names its agent when the run tested several, and its suite when it ran several."""
    from farm.console.safe import neutralise

    several, suites = len(tallies) > 1, several_suites(tallies)
    repeated = any(case.tries > 1 for cases in tallies.values() for case in cases.values())
    rate = f"{gate.min_pass_rate:g}"
    lines = []
    for agent, cases in tallies.items():
        for key, case in cases.items():
            label = case_label(key, suites)
            name = neutralise(f"{agent}: {label}" if several else label)
            stop = f" ({stop_said(case.stopped, case.tries, case.verdict)})" if case.stopped else ""
            if case.flaky and case.passes_gate(gate.min_pass_rate):
                lines.append(
                    Text(f"  {name}: flaky, passed the {rate} gate: {case.passes} of {case.tries}{stop}", style="yellow")
                )
            elif repeated and not case.passes_gate(gate.min_pass_rate):
                lines.append(Text(f"  {name}: {_failed_gate(case, gate.min_pass_rate)}{stop}", style="red"))
    style = "bold green" if gate.verdict == "passed" else "bold red"
    return [*lines, *adaptive_lines(tallies), Text("Gate: ", style=style).append(neutralise(gate.sentence))]


def adaptive_lines(tallies: Tallies) -> list[Text]:
    """Under adaptive repeats, one line: the tries made, and how the cases stopped."""
    said = adaptive_said(tallies)
    return [Text(said)] if said else []


def _failed_gate(case: CaseTally, min_pass_rate: float) -> str:
    """Why a repeated case failed its gate: its errors or timeouts, else too few passes."""
    rate = f"{min_pass_rate:g}"
    if not case.broken:
        return f"below the {rate} gate: {case.passes} of {case.tries}"
    tries = f"{case.tries} try" if case.tries == 1 else f"{case.tries} tries"
    below = "" if CaseTally(case.passes, case.tries).passes_gate(min_pass_rate) else f", below the {rate} gate"
    return f"{case.broken} of {tries} ended in an error or a timeout ({case.passes} of {case.tries} passed{below})"
