"""``farm report [PATH...]``: analyse one or many runs' results (docs/reference/cli.md);
with no path, every run under ``[farm].results_dir``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from farm.cli.options import configured_results_dir
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from farm.durations import format_duration
from farm.errors import FarmError, UsageError
from farm.numbers import whole
from farm.results import blame_text
from farm.results import format_usd as _usd
from farm.wording import plural

if TYPE_CHECKING:
    from datetime import datetime

    from farm.reports.models import CaseChange, CaseDelta, CaseRate, Latency, PairedComparison, Report, RunSummary, TrendPoint
    from farm.results import StabilityClass

__all__ = ["render", "report"]

#: Width of the tables when stdout is not a terminal (and COLUMNS is not set).
PIPE_WIDTH = 160
#: Latency-per-turn rows shown before "… and N more".
TURN_ROWS = 30


def report(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="PATH",
            help="Run folders, results folders holding runs, or result files (.parquet, .jsonl); default: [farm].results_dir.",
            show_default=False,
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")] = False,
    top: Annotated[
        str, typer.Option("--top", metavar="N", help="Rows per list: failed assertions, flaky cases, changed cases (0: all).")
    ] = "10",
    config: Annotated[
        str | None,
        typer.Option("--config", metavar="PATH", help="Path to farm.toml, for its results_dir (default: ./farm.toml)."),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="table|json|md",
            help="md: the gate's Markdown summary of one run (a results folder: its latest), as for a PR comment.",
        ),
    ] = "table",
) -> None:
    """Summarise runs: statuses, tokens, latency, failing assertions, flaky cases, cases that changed between runs."""
    from farm.cli.app import fail

    if format not in ("table", "json", "md"):
        fail(UsageError(f"--format: '{format}' is not one of: table, json, md"))
    try:
        rows = whole("--top", top, 0, hint="--top 0 shows all")  # as text, so that a bad one is said in one sentence
    except FarmError as exc:
        fail(exc)
    if format == "md":
        try:
            from farm.reports.markdown import markdown_of

            sys.stdout.write(markdown_of(paths or [configured_results_dir(config)]))
        except FarmError as exc:
            fail(exc)
        return
    json_out = json_out or format == "json"
    try:
        from farm.reports.analysis import analyse  # pyarrow: only for this command

        result = analyse(paths or [configured_results_dir(config)], top=rows)
    except FarmError as exc:
        fail(exc)
    if json_out:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        console = Console(highlight=False)
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console.width = PIPE_WIDTH  # a file or a CI log is not a narrow terminal
        render(result, console)


def render(report: Report, console: Console) -> None:
    """Print ``report`` as rich tables."""
    _runs(report, console)
    _trend(report, console)
    _summary(report, console)
    _agents(report, console)
    if report.tokens and any(usage.total_tokens for usage in report.tokens):
        priced = any(usage.cost_usd is not None for usage in report.tokens)
        table = _table(
            "Tokens per agent",
            ("Agent", "left"),
            ("Connector", "left"),
            ("Role", "left"),
            ("Cases", "right"),
            ("Prompt", "right"),
            ("Completion", "right"),
            ("Total", "right"),
            *((("Cost", "right"),) if priced else ()),
        )
        for usage in report.tokens:
            table.add_row(
                usage.agent,
                usage.connector or "",
                usage.role,
                str(usage.cases),
                str(usage.prompt_tokens),
                str(usage.completion_tokens),
                str(usage.total_tokens),
                *((_usd(usage.cost_usd),) if priced else ()),
            )
        console.print(table)
    _latency(console, "Turn latency per agent (ms)", "Agent", report.latency_by_agent)
    _latency(console, "Turn latency per turn index (ms)", "Turn", report.latency_by_turn)
    if report.failed_assertions:
        per_agent = any(failure.agent for failure in report.failed_assertions)
        table = _table(
            "Assertions that failed most",
            *((("Agent", "left"),) if per_agent else ()),
            ("Type", "left"),
            ("Message", "left"),
            ("Failures", "right"),
            ("Cases", "right"),
        )
        for failure in report.failed_assertions:
            table.add_row(
                *((Text(failure.agent or ""),) if per_agent else ()),
                failure.type or "", Text(failure.message or ""), str(failure.count), str(failure.cases),
            )  # fmt: skip
        console.print(table)
        _more(console, report.failed_assertions_total - len(report.failed_assertions), "failing assertions")
    if report.missed_checkpoints:
        per_agent = any(miss.agent for miss in report.missed_checkpoints)
        table = _table(
            "Checkpoints missed most",
            *((("Agent", "left"),) if per_agent else ()),
            ("Checkpoint", "left"),
            ("Misses", "right"),
            ("Cases", "right"),
        )
        for miss in report.missed_checkpoints:
            table.add_row(
                *((Text(miss.agent or ""),) if per_agent else ()),
                Text(miss.checkpoint_id or ""),
                str(miss.count),
                str(miss.cases),
            )
        console.print(table)
        _more(console, report.missed_checkpoints_total - len(report.missed_checkpoints), "checkpoints")
    _stability(report, console)
    _adaptive(report, console)
    _paired(report, console)
    _comparison(report, console)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="yellow"))


def _runs(report: Report, console: Console) -> None:
    if len(report.runs) == 1:
        run = report.runs[0]
        started = f", started {run.started_at:%Y-%m-%d %H:%M:%S %Z}" if run.started_at else ""
        early = f", {run.status}: {run.not_run} case runs not run" if run.status not in (None, "finished") else ""
        console.print(Text(f"Run {run.run_id} ({run.path}{started}{early})", style="bold"))
        return
    priced = any(run.cost_usd is not None for run in report.runs)
    per_agent = any(run.per_agent for run in report.runs)
    early = any(run.status not in (None, "finished") for run in report.runs)  # a run that stopped counts apart
    started, day = _start_format([run.started_at for run in report.runs])
    table = _table(
        f"Runs ({len(report.runs)}, oldest first{', each agent apart' if per_agent else ''}{f', {day}' if day else ''})",
        ("Run", "left", True),
        *((("Agent", "left"),) if per_agent else ()),
        ("Started", "left", True),
        ("Cases", "right"),
        ("Pass", "right"),
        ("Fail", "right"),
        ("Skip", "right"),
        ("Err", "right"),
        ("T/O", "right"),
        ("Rate", "right"),
        *((("Cost", "right"),) if priced else ()),
        *((("Ended", "left"),) if early else ()),
    )
    for run in report.runs:
        for row in run.per_agent or [run]:
            _run_row(table, run, row, per_agent, priced, started, early)
    console.print(table)


TREND_RUNS = 12
"""Runs the trend table shows, the latest (``--json`` has every run's)."""


def _trend(report: Report, console: Console) -> None:
    """The pass rate of each agent in each of the latest runs, a run a row, the newest last.

    A run is named by its id and its start to the second (runs often start within a minute of each
    other). Each agent has its own column while they fit the console; more agents than fit, and the
    table is a row per run and agent instead, so that no figure is ever cut."""
    runs = list(dict.fromkeys(point.run_id for point in report.trend))
    if len(runs) < 2:
        return
    shown = runs[-TREND_RUNS:]
    older = len(runs) - len(shown)
    points = [point for point in report.trend if point.run_id in set(shown)]
    agents = sorted({point.agent for point in points})
    title = (
        f"Pass rate trend (oldest first, the latest {len(shown)} of {len(runs)} runs)"
        if older
        else "Pass rate trend (oldest first)"
    )
    table = _trend_per_run(title, shown, points, agents)
    if Measurement.get(console, console.options.update_width(10_000), table).maximum > console.width:
        table = _trend_per_agent(title, points)
    console.print(table)
    if older:
        console.print(Text(f"  … and {plural(older, 'older run')} (--json has every run's)", style="dim"))


def _trend_per_run(title: str, runs: list[str], points: list[TrendPoint], agents: list[str]) -> Table:
    """A row per run: its id, its start, then each agent's pass rate in a column of its own."""
    rates = {(point.run_id, point.agent): point.pass_rate for point in points}
    started = {point.run_id: point.started_at for point in points}
    table = _table(title, ("Run", "left", True), ("Started", "left", True), *((agent or _UNNAMED, "right") for agent in agents))
    for run in runs:
        table.add_row(
            Text(run), _second(started[run]), *(_rate(rates[run, agent]) if (run, agent) in rates else "" for agent in agents)
        )
    return table


def _trend_per_agent(title: str, points: list[TrendPoint]) -> Table:
    """A row per run and agent: for more agents than fit the console side by side."""
    table = _table(title, ("Run", "left", True), ("Started", "left", True), ("Agent", "left", True), ("Pass rate", "right"))
    for point in points:
        table.add_row(Text(point.run_id), _second(point.started_at), Text(point.agent or _UNNAMED), _rate(point.pass_rate))
    return table


_UNNAMED = "(unknown)"


def _second(started: datetime | None) -> str:
    return f"{started:%Y-%m-%d %H:%M:%S}" if started else "—"


def _start_format(starts: list[datetime | None]) -> tuple[str, str | None]:
    """How the runs table writes each run's start, short enough for 80 columns and telling apart two
    runs of one minute: the time alone when every run started on one day (that day is returned, for
    the title), else the day and the minute, with the seconds only when two runs share a minute."""
    known = [start for start in starts if start is not None]
    days = {f"{start:%Y-%m-%d}" for start in known}
    if len(days) == 1:
        return "%H:%M:%S", days.pop()
    minutes = [f"{start:%Y-%m-%d %H:%M}" for start in known]
    return ("%m-%d %H:%M" if len(set(minutes)) == len(minutes) else "%m-%d %H:%M:%S"), None


def _run_row(table: Table, run: RunSummary, row: RunSummary, per_agent: bool, priced: bool, started: str, early: bool = False) -> None:
    """One row of the runs table: the run's figures, or (``per_agent``) one agent's in it; ``started``:
    how the start is written (:func:`_start_format`); ``early``: the table says how each run ended
    (a note after the tables says what a run that stopped left out)."""
    counts = row.counts
    table.add_row(
        Text(run.run_id or ""),
        *((Text(row.agent or ""),) if per_agent else ()),
        format(run.started_at, started) if run.started_at else "",
        str(counts.total), str(counts.passed), str(counts.failed), str(counts.skipped), str(counts.error), str(counts.timeout),
        _rate(counts.pass_rate),
        *((_usd(row.cost_usd),) if priced else ()),
        *((run.status or "",) if early else ()),
    )  # fmt: skip


def _summary(report: Report, console: Console) -> None:
    console.print()
    console.print(Text("Summary", style="bold"))
    if not report.summary.per_agent:
        _summary_lines(console, report.summary, "  ")
    for own in report.summary.per_agent:  # several agents: each one's own figures, none of them all together
        console.print(Text(f"  Agent {own.agent}", style="bold"))
        _summary_lines(console, own, "    ")


def _summary_lines(console: Console, summary: RunSummary, indent: str) -> None:
    counts = summary.counts
    lines = [
        ("Case runs", str(counts.total)),
        ("Passed", str(counts.passed)),
        ("Failed", str(counts.failed)),
        ("Skipped", str(counts.skipped)),
        ("Errors", str(counts.error) + (f" ({counts.role_errors} of a role, not the agent)" if counts.role_errors else "")),
        ("Timeouts", str(counts.timeout)),
        *([("Blame", blamed)] if (blamed := blame_text(counts.blame)) else []),
        (
            "Pass rate",
            _rate(counts.pass_rate) + (" (skipped and role errors excluded)" if counts.role_errors else " (skipped excluded)"),
        ),
        ("Turns", f"{summary.turns} (avg {summary.avg_turns:.1f} per case)"),
        ("Case time", format_duration(summary.duration_ms / 1000)),
        ("Tokens", f"{summary.total_tokens} (prompt {summary.prompt_tokens}, completion {summary.completion_tokens})"),
    ]
    if summary.cost_usd is not None or summary.role_cost_usd is not None:
        lines.append(
            ("Cost", f"{_usd(summary.cost_usd)} agents under test, {_usd(summary.role_cost_usd)} simulator, judge and generator")
        )
    if summary.retries.cases:
        retries = summary.retries
        lines.append(
            (
                "Retries",
                f"{retries.cases} case runs retried ({retries.attempts} attempts again), {retries.passed} passed after a retry",
            )
        )
    width = max(len(label) for label, _ in lines) + 2
    for label, value in lines:
        console.print(Text(f"{indent}{label + ':':<{width}}{value}"))


def _agents(report: Report, console: Console) -> None:
    """Per run and agent: pass rate with its 95 % interval, pass@k and pass^k, cost; then their flaky cases."""
    if not report.agents:
        return
    several_runs = len({stats.run_id for stats in report.agents}) > 1
    ks = {stats.k for stats in report.agents if stats.k}
    k_label = str(next(iter(ks))) if len(ks) == 1 else "k"
    priced = any(stats.cost_usd is not None for stats in report.agents)
    clustered = any(stats.interval_method == "wilson-clustered" for stats in report.agents)
    table = _table(
        "Pass rate per agent (95 % Wilson interval" + (", clustered by case over repeated tries)" if clustered else ")"),
        *((("Run", "left", True),) if several_runs else ()),
        ("Agent", "left"),
        ("Cases", "right"),
        ("Tries", "right"),
        ("Pass rate", "right"),
        ("95 % interval", "right"),
        *(((f"pass@{k_label}", "right"), (f"pass^{k_label}", "right")) if ks else ()),
        *((("Cost", "right"), ("Per case run", "right")) if priced else ()),
    )
    for stats in report.agents:
        k_cells: tuple[str, ...] = ()
        if ks:
            k_note = f" (k={stats.k})" if stats.k and len(ks) > 1 else ""
            k_cells = (_rate(stats.pass_at_k) + k_note, _rate(stats.pass_hat_k) + k_note)
        table.add_row(
            *((Text(stats.run_id),) if several_runs else ()),
            Text(stats.agent),
            str(stats.cases),
            str(stats.tries),
            _rate(stats.pass_rate),
            _interval(stats.interval),
            *k_cells,
            *((_usd(stats.cost_usd), _usd(stats.cost_per_case_usd)) if priced else ()),
        )
    console.print(table)
    if ks:
        console.print(
            Text(
                f"  pass@{k_label}: the chance that at least one of {k_label} tries of a case passes; "
                f"pass^{k_label}: that all {k_label} pass (unbiased estimates, averaged over the cases).",
                style="dim",
            )
        )
    for stats in report.agents:
        if stats.role_errors:
            where = f" in {stats.run_id}" if several_runs else ""
            console.print(
                Text(
                    f"  {stats.agent}{where}: {plural(stats.role_errors, 'case run')} left out, "
                    "as a role failed (simulator, judge, generator or reporter), not the agent.",
                    style="yellow",
                )
            )
    for stats in report.agents:
        if not stats.flaky:
            continue
        where = f" in {stats.run_id}" if several_runs else ""
        flaky = _table(
            f"Flaky cases of {stats.agent}{where} (passed some tries, not others)",
            ("Case", "left"),
            ("Tries", "right"),
            ("Passed", "right"),
            ("Pass rate", "right"),
            ("95 % interval", "right"),
            *(((f"pass^{stats.k}", "right"),) if stats.k else ()),
        )
        twins = _ids_in_several_suites(stats.flaky, report.shared_case_ids)
        for case in stats.flaky:
            flaky.add_row(
                Text(_case_label(case.case_id, case.name, case.suite if case.case_id in twins else None)),
                str(case.tries),
                str(case.passes),
                _rate(case.pass_rate),
                _interval(case.interval),
                *((_rate(case.pass_hat_k),) if stats.k else ()),
            )
        console.print(flaky)
        _more(console, stats.flaky_total - len(stats.flaky), "flaky cases")


def _paired(report: Report, console: Console) -> None:
    """The comparisons in one table (difference, interval, p-values, detectable difference), then each one's
    sentence and the cases that went better and worse."""
    if not report.comparisons:
        return
    several = len(report.comparisons) > 1
    table = _table(
        "Paired comparisons (B - A, percentage points" + (", p Holm-adjusted for the comparisons)" if several else ")"),
        ("A", "left"),
        ("B", "left"),
        ("Cases", "right"),
        ("Difference", "right"),
        ("95 % interval", "right"),
        ("Test", "left"),
        ("p", "right"),
        *((("p (Holm)", "right"),) if several else ()),
        ("Detectable", "right"),
    )
    for comparison in report.comparisons:
        low, high = comparison.difference_interval
        detectable = comparison.detectable_difference
        table.add_row(
            Text(comparison.a),
            Text(comparison.b),
            str(comparison.cases),
            Text(_points(comparison.difference), style="green" if comparison.significant else ""),
            f"[{_points(low)}, {_points(high)}]",
            _SHORT_TESTS.get(comparison.test, comparison.test),
            _p(comparison.p_value),
            *((_p(comparison.p_adjusted),) if several else ()),
            "—" if detectable is None else f"{100 * detectable:.1f}",
        )
    console.print(table)
    legend = "  Detectable: the smallest difference these cases would find significant 80 % of the time."
    tests = {comparison.test for comparison in report.comparisons}
    if "paired t and Cochran-Mantel-Haenszel" in tests:
        legend += " t, CMH: the paired t and Cochran-Mantel-Haenszel tests, the larger p."
    if "paired t of unbiased estimates (adaptive repeats)" in tests:
        legend += " t, est.: the paired t test of each case's unbiased estimate under adaptive repeats (est.), not its biased pass fraction."
    console.print(Text(legend, style="dim"))
    for comparison in report.comparisons:
        console.print()
        console.print(Text(_paired_title(comparison), style="bold"))
        console.print(Text(f"  {comparison.sentence}", style="green" if comparison.significant else "yellow"))
        for title, rows, total, row_style in (
            (f"Better on {comparison.b}", comparison.better, comparison.b_better, "green"),
            (f"Worse on {comparison.b}", comparison.worse, comparison.b_worse, "red"),
        ):
            if rows:
                console.print(_deltas_table(title, comparison, rows, row_style, report.shared_case_ids))
                _more(console, total - len(rows), "cases")


_SHORT_TESTS = {"paired t and Cochran-Mantel-Haenszel": "t, CMH", "paired t of unbiased estimates (adaptive repeats)": "t, est."}
"""A test's name as the comparisons table's narrow column shows it (the legend under it spells it out)."""


def _points(fraction: float) -> str:
    return f"{100 * fraction:+.1f}"


def _p(p: float) -> str:
    from farm.reports.stats import format_p  # farm.reports imports pyarrow: only when a report is made

    text = format_p(p)  # "p = 0.25", "p < 0.0001": the cell keeps "< 0.0001"
    return text.removeprefix("p = ").removeprefix("p ")


def _paired_title(comparison: PairedComparison) -> str:
    if comparison.kind == "agents":
        where = "" if comparison.a.startswith(f"{comparison.a_run} (") else f" in {comparison.a_run}"
        return f"{comparison.a} vs {comparison.b}{where}, on the {plural(comparison.cases, 'case')} both ran"
    return f"{comparison.a} -> {comparison.b}, on the {plural(comparison.cases, 'case')} both ran"


def _deltas_table(title: str, comparison: PairedComparison, rows: list[CaseDelta], style: str, shared: list[str]) -> Table:
    table = _table(title, ("Case", "left"), (comparison.a, "right"), (comparison.b, "right"))
    twins = _ids_in_several_suites(rows, shared)
    for row in rows:
        table.add_row(
            Text(_case_label(row.case_id, row.name, row.suite if row.case_id in twins else None), style=style),
            _tries(row.a_passes, row.a_tries, row.a_estimate),
            _tries(row.b_passes, row.b_tries, row.b_estimate),
        )
    return table


def _tries(passes: int, tries: int, estimate: float | None) -> str:
    """A case's passes of its tries; where adaptive repeats stopped it, with the estimate the comparison counts."""
    return f"{passes}/{tries}" if estimate is None else f"{passes}/{tries} (est. {estimate:.0%})"


def _interval(bounds: tuple[float, float]) -> str:
    return f"[{bounds[0]:.1%}, {bounds[1]:.1%}]"


def _latency(console: Console, title: str, key: str, rows: list[Latency]) -> None:
    if not rows:
        return
    per_agent = any(row.agent for row in rows)
    table = _table(
        title, *((("Agent", "left"),) if per_agent else ()), (key, "left"),
        ("Turns", "right"), ("p50", "right"), ("p95", "right"), ("p99", "right"), ("max", "right"),
    )  # fmt: skip
    for row in rows[:TURN_ROWS]:
        table.add_row(
            *((Text(row.agent or ""),) if per_agent else ()),
            Text(row.group),
            str(row.turns),
            f"{row.p50_ms:.0f}",
            f"{row.p95_ms:.0f}",
            f"{row.p99_ms:.0f}",
            f"{row.max_ms:.0f}",
        )
    console.print(table)
    if len(rows) > TURN_ROWS:
        console.print(Text(f"  … and {len(rows) - TURN_ROWS} more rows (--json has them all)", style="dim"))


def _stability(report: Report, console: Console) -> None:
    stability = report.stability
    if not stability.repeated:
        return
    console.print()
    if len(stability.agents) > 1:  # each agent's tries of a case apart: a class count per agent
        console.print(
            Text(
                f"Stability over {plural(stability.cases, 'case')}, per agent; {stability.flaky_total} flaky (case and agent)",
                style="bold",
            )
        )
        for agent, classes in stability.classes_by_agent.items():
            console.print(Text(f"  {agent}: {_classes(classes)}"))
    else:
        console.print(
            Text(
                f"Stability over {plural(stability.cases, 'case')}: {_classes(stability.classes)}; {stability.flaky_total} flaky",
                style="bold",
            )
        )
    several_agents = len(stability.agents) > 1
    if stability.flaky:
        console.print(
            _rates_table(
                "Flaky cases (passed in some runs, not in others)", stability.flaky, several_agents, report.shared_case_ids
            )
        )
        _more(console, stability.flaky_total - len(stability.flaky), "flaky cases")
    if stability.least_stable:
        console.print(
            _rates_table("Pass rate per case (lowest first)", stability.least_stable, several_agents, report.shared_case_ids)
        )


def _adaptive(report: Report, console: Console) -> None:
    """Where each case stopped under adaptive repeats: "stopped after 2 tries: above the gate"."""
    if not report.adaptive:
        return
    console.print()
    console.print(Text(f"Adaptive repeats: {plural(report.adaptive_total, 'case')} (below their gate first)", style="bold"))
    several = len({row.agent for row in report.adaptive}) > 1
    for row in report.adaptive:
        name = f"{row.agent}: {row.case_id}" if several else row.case_id
        console.print(Text(f"  {name}: {row.said}", style="green" if row.verdict == "above" else "red"), soft_wrap=True)
    _more(console, report.adaptive_total - len(report.adaptive), "cases")


def _classes(classes: dict[StabilityClass, int]) -> str:
    return ", ".join(f"{count} {name}" for name, count in classes.items() if count) or "none ran"


def _rates_table(title: str, rows: list[CaseRate], several_agents: bool, shared: list[str]) -> Table:
    table = _table(
        title,
        ("Case", "left"),
        *((("Agent", "left"),) if several_agents else ()),
        ("Runs", "right"),
        ("Passed", "right"),
        ("Pass rate", "right"),
        ("Class", "left"),
        ("Statuses", "left"),
    )
    twins = _ids_in_several_suites(rows, shared)
    for row in rows:
        statuses = ", ".join(f"{count} {status}" for status, count in row.statuses.items())
        table.add_row(
            Text(_case_label(row.case_id, row.name, row.suite if row.case_id in twins else None)),
            *((Text(row.agent or ""),) if several_agents else ()),
            str(row.runs),
            str(row.passes),
            _rate(row.pass_rate),
            row.stability_class or "",
            statuses,
        )
    return table


def _comparison(report: Report, console: Console) -> None:
    comparison = report.comparison
    if comparison is None:
        return
    console.print()
    console.print(Text(comparison.sentence, style="bold" if comparison.paired == 0 else ""), soft_wrap=True)
    if comparison.paired == 0:  # no case in common: nothing changed between them, nothing to list
        return
    console.print(
        Text(
            f"Cases that changed from {comparison.base_run} to {comparison.head_run}: "
            f"{comparison.regressions_total} passed -> failed, {comparison.fixes_total} failed -> passed",
            style="bold",
        )
    )
    if comparison.regressions_total or comparison.fixes_total:  # a list of changes is not a finding
        console.print(
            Text(
                "Single cases change between runs by chance too: whether the runs differ as a whole is their paired difference.",
                style="dim",
            ),
            soft_wrap=True,
        )
    for title, rows, total, style in (
        ("Passed -> failed", comparison.regressions, comparison.regressions_total, "red"),
        ("Failed -> passed", comparison.fixes, comparison.fixes_total, "green"),
    ):
        if rows:
            console.print(_changes_table(title, rows, style, any(row.agent for row in rows), report.shared_case_ids))
            _more(console, total - len(rows), "cases")


def _changes_table(title: str, rows: list[CaseChange], style: str, several_agents: bool, shared: list[str]) -> Table:
    table = _table(
        title,
        ("Case", "left"),
        *((("Agent", "left"),) if several_agents else ()),
        ("Before", "left"),
        ("After", "left"),
        ("Error", "left"),
    )
    twins = _ids_in_several_suites(rows, shared)
    for row in rows:
        table.add_row(
            Text(_case_label(row.case_id, row.name, row.suite if row.case_id in twins else None), style=style),
            *((Text(row.agent or ""),) if several_agents else ()),
            row.base_status,
            row.head_status,
            Text(row.error or ""),
        )
    return table


def _table(title: str, *columns: tuple[str, str] | tuple[str, str, bool]) -> Table:
    """A table with ``(header, justify[, no_wrap])`` columns; text folds rather than ending in an ellipsis."""
    table = Table(
        title=f"\n{title}",
        title_justify="left",
        title_style="bold",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for name, justify, *no_wrap in columns:
        table.add_column(name, justify=justify, overflow="fold", no_wrap=bool(no_wrap and no_wrap[0]) or justify == "right")  # type: ignore[arg-type]
    return table


def _case_label(case_id: str, name: str | None, suite: str | None = None) -> str:
    label = f"{case_id} — {name}" if name else case_id
    return f"{label} ({suite})" if suite else label


def _ids_in_several_suites(rows: list, shared: list[str]) -> set[str]:
    """Case ids that more than one suite uses, among ``rows`` or in the runs read (``shared``, as
    :attr:`Report.shared_case_ids` has them): their rows name the suite too, even the one row of an
    id whose other suite's case is not listed (as it passed)."""
    suites: dict[str, set[str]] = {}
    for row in rows:
        suites.setdefault(row.case_id, set()).add(row.suite)
    return {case_id for case_id, found in suites.items() if len(found) > 1} | set(shared)


def _rate(rate: float | None) -> str:
    return "—" if rate is None else f"{rate:.1%}"


def _more(console: Console, hidden: int, what: str) -> None:
    if hidden > 0:
        console.print(Text(f"  … and {hidden} more {what} (--top 0 shows all)", style="dim"))
