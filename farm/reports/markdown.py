"""The gate's Markdown summary of a run, for CI: what ``farm test`` appends to
``$GITHUB_STEP_SUMMARY`` and what ``farm report --format md`` prints (a PR comment).

Both build it here from the run folder alone (its cases and ``run.json``'s ``gate``), so they
are the same text: the verdict, each agent's pass rate with its 95 % interval, the comparison
with the baseline, and the cases that failed their gate (at most :data:`FAILING_ROWS`).
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path

from farm.errors import UsageError
from farm.gate import (
    DEFAULT_MIN_PASS_RATE,
    Tallies,
    adaptive_said,
    case_label,
    cases_of,
    ended_early,
    judge,
    several_suites,
    tallies_of,
    verdict_sentence,
)
from farm.reports.stats import clustered_interval, format_p
from farm.results import blame_text
from farm.results._folder import RUN_JSON
from farm.writers.runinfo import RunGate, RunInfo

__all__ = ["FAILING_ROWS", "append_step_summary", "gate_markdown", "markdown_of", "run_markdown"]

FAILING_ROWS = 50
"""Failing cases listed; the rest are counted."""


def markdown_of(paths: Sequence[Path]) -> str:
    """``farm report --format md``: the summary of the one run in ``paths`` (a run folder), or of the
    latest finished run in a results folder."""
    from farm.results import list_runs, read_run

    if len(paths) != 1:
        raise UsageError("--format md: give one run folder, or a results folder (its latest finished run)")
    path = Path(paths[0])
    runs = list_runs(path) if path.is_dir() and not (path / RUN_JSON).is_file() else []
    if not runs:
        return run_markdown(read_run(path).path)
    finished = [run for run in runs if run.status == "finished"]
    if not finished:
        raise UsageError(f"--format md: {path} holds no finished run")
    return run_markdown(max(finished, key=lambda run: (run.info.started_at or 0.0, run.name)).path)


def run_markdown(run_dir: Path) -> str:
    """The Markdown summary of the run in ``run_dir``; a run without a gate is judged as
    ``farm test`` would with its defaults (every try must pass, no baseline), a run that did not
    finish (interrupted, stopped, killed) failing it."""
    from farm.results import read_run

    run = read_run(run_dir)  # read once: its record, its cases, their tallies
    info = run.info
    cases = cases_of(run)
    tallies = tallies_of(cases)
    stopped, not_run = ended_early(run.status, info, cases)
    gate = info.gate
    if gate is None or (stopped and not gate.stopped):  # an unfinished run is never a green gate
        gate = judge(tallies, info.options.min_pass_rate or DEFAULT_MIN_PASS_RATE, stopped=stopped, not_run=not_run)
    import pyarrow.compute as pc

    blamed = run.cases(columns=["blame"])["blame"].drop_null()
    return gate_markdown(info, gate, tallies, {row["values"]: row["counts"] for row in pc.value_counts(blamed).to_pylist()})


def gate_markdown(info: RunInfo, gate: RunGate, tallies: Tallies, blames: dict[str, int] | None = None) -> str:
    """The summary of a run (``info``) with ``gate``, whose cases are ``tallies``; ``blames``: its failed
    dynamic cases by whose failure they are."""
    mark = "✅" if gate.verdict == "passed" else "❌"
    said = verdict_sentence(gate) if gate.comparisons else gate.sentence  # the comparisons' sentences are below
    lines = [f"## {mark} Agent Test Farm: gate {gate.verdict}", "", _text(said), ""]
    facts = [f"run `{_code(info.run_id)}`", f"min pass rate {gate.min_pass_rate:g}"]
    if gate.baseline_run_id:
        facts.append(f"baseline `{_code(gate.baseline_run_id)}`")
    if gate.stopped:
        facts.append(f"{_text(gate.stopped.replace('_', ' '))}: {gate.not_run} case runs not run")
    lines += [" · ".join(facts), ""]
    blamed = blame_text(blames or {})
    if blamed:
        lines += [f"Whose failures: {_text(blamed)}", ""]
    order = [agent for agent in info.agents if agent in tallies] + sorted(agent for agent in tallies if agent not in info.agents)
    tallies = {agent: tallies[agent] for agent in order}  # the run's own order of -n, however its results came
    lines += _agents(tallies, gate.min_pass_rate)
    if gate.comparisons:
        lines += _comparisons(gate)
    lines += _failing(tallies, gate.min_pass_rate)
    lines += _adaptive(tallies)
    return "\n".join(lines).rstrip("\n") + "\n"


def _adaptive(tallies: Tallies) -> list[str]:
    """Under adaptive repeats: how many tries were made and where each case stopped (those below
    their gate first)."""
    from farm.sequential import stop_said

    said = adaptive_said(tallies)
    if said is None:
        return []
    suites = several_suites(tallies)
    stopped = [(agent, key, case) for agent, cases in tallies.items() for key, case in cases.items() if case.stopped]
    stopped.sort(key=lambda row: (row[2].verdict == "above", row[0], row[1]))
    lines = ["### Adaptive repeats", "", _text(said), "", "| Agent | Case | Passed tries | Stopped |", "|---|---|--:|---|"]
    for agent, key, case in stopped[:FAILING_ROWS]:
        assert case.stopped is not None
        lines.append(
            f"| {_text(agent or '(unnamed)')} | {_text(case_label(key, suites))} | {case.passes} of {case.tries} | {_text(stop_said(case.stopped, case.tries, case.verdict))} |"
        )
    if len(stopped) > FAILING_ROWS:
        lines += ["", f"… and {len(stopped) - FAILING_ROWS} more."]
    return [*lines, ""]


def _agents(tallies: Tallies, min_pass_rate: float) -> list[str]:
    lines = [
        "### Pass rate per agent",
        "",
        "| Agent | Cases | Passed their gate | Tries | Passed tries | Pass rate | 95 % interval |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for agent, cases in tallies.items():
        tries = sum(case.tries for case in cases.values())
        passes = sum(case.passes for case in cases.values())
        low, high = clustered_interval([(case.passes, case.tries) for case in cases.values()])
        gated = sum(case.passes_gate(min_pass_rate) for case in cases.values())
        rate = f"{passes / tries:.1%}" if tries else "—"
        lines.append(
            f"| {_text(agent or '(unnamed)')} | {len(cases)} | {gated} | {tries} | {passes} | {rate} | {low:.1%} – {high:.1%} |"
        )
    return [*lines, ""]


def _comparisons(gate: RunGate) -> list[str]:
    lines = [
        f"### Compared with the baseline `{_code(gate.baseline_run_id or '')}`",
        "",
        "| Agent | Baseline agent | Cases | Difference | 95 % interval | p (Holm) | Test | Verdict |",
        "|---|---|--:|--:|---|--:|---|---|",
    ]
    for c in gate.comparisons:
        low, high = c.difference_interval
        verdict = "**significantly worse**" if c.worse else ("significant" if c.p_adjusted < 0.05 else "not significant")
        lines.append(
            f"| {_text(c.agent or '(unnamed)')} | {_text(c.baseline_agent or '(unnamed)')} | {c.cases} | {100 * c.difference:+.1f} pp | "
            f"{100 * low:+.1f} to {100 * high:+.1f} pp | {_text(format_p(c.p_adjusted).removeprefix('p = ').removeprefix('p '))} | {c.test} | {verdict} |"
        )
    return [*lines, "", *(f"- {_text(c.sentence)}" for c in gate.comparisons), ""]


def _failing(tallies: Tallies, min_pass_rate: float) -> list[str]:
    """The cases below their gate, each named by its id (and suite, when the run ran several)."""
    suites = several_suites(tallies)
    failing = [
        (agent, key, case)
        for agent, cases in tallies.items()
        for key, case in sorted(
            cases.items(), key=lambda item: (item[1].passes / item[1].tries if item[1].tries else 0.0, item[0])
        )
        if not case.passes_gate(min_pass_rate)
    ]
    if not failing:
        return []
    lines = [
        f"### Cases that failed their gate ({len(failing)})",
        "",
        "| Agent | Case | Passed tries | Errors and timeouts |",
        "|---|---|--:|--:|",
    ]
    for agent, key, case in failing[:FAILING_ROWS]:
        lines.append(f"| {_text(agent or '(unnamed)')} | {_text(case_label(key, suites))} | {case.passes} of {case.tries} | {case.broken} |")
    if len(failing) > FAILING_ROWS:
        lines += ["", f"… and {len(failing) - FAILING_ROWS} more."]
    return [*lines, ""]


def _text(value: str) -> str:
    """``value`` as Markdown shows it literally, in a table cell or a paragraph: no HTML, no line
    break, no ``|`` ending the cell, no emphasis or link."""
    escaped = html.escape(" ".join(value.split()), quote=False)
    for char in "\\|*_`[]#":
        escaped = escaped.replace(char, "\\" + char)
    return escaped


def _code(value: str) -> str:
    """``value`` inside a code span: its backticks and line breaks removed."""
    return " ".join(value.replace("`", "'").split())


def append_step_summary(markdown: str) -> Path | None:
    """Append ``markdown`` to the file ``$GITHUB_STEP_SUMMARY`` names (GitHub Actions); None without one."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    with path.open("a", encoding="utf-8") as file:
        file.write(markdown + "\n")
    return path
