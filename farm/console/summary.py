"""The summary block that ends a run: the counts per status (and per agent when the run
tested several), turns, time, tokens, cost, role calls and, after ``--runs N``, how stable
each case was."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from farm.console.safe import SafeConsole, one_line
from farm.durations import format_duration
from farm.results import StabilityClass, Status, blame_text
from farm.results import format_usd as usd
from farm.summary import Summary

__all__ = ["print_quiet_summary", "print_summary", "summary_line"]

_CLASS_STYLE = {
    StabilityClass.STABLE: "green",
    StabilityClass.MOSTLY_STABLE: "green",
    StabilityClass.UNSTABLE: "yellow",
    StabilityClass.HIGHLY_UNSTABLE: "red",
    StabilityClass.CONSISTENTLY_FAILING: "red",
}


def print_summary(console: SafeConsole, summary: Summary, stability_rows: int) -> None:
    """The seed's Summary block (below its rule), then a Stability table of at most
    ``stability_rows`` cases (the least stable first) when a case ran more than once."""
    rows = [
        ("Total", Text(f"{summary.total} {'test' if summary.total == 1 else 'tests'}")),
        ("Passed", _count(summary.passed, "green")),
        ("Failed", _count(summary.failed, "red")),
        ("Skipped", _count(summary.skipped, "yellow")),
        ("Errors", _count(summary.errors, "red").append(_of_roles(summary.role_errors))),
        ("Timeouts", _count(summary.timeouts, "yellow")),
    ]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(Text(f"  {label + ':':<{width}}").append_text(value))
    blamed = blame_text(summary.blames)
    if blamed:
        console.print(f"  {blamed}", highlight=False)
    if summary.several_agents:
        _agents(console, summary)
    console.print()
    console.print(f"  Total turns: {summary.total_turns}", highlight=False)
    console.print(f"  Avg turns/test: {summary.avg_turns:.1f}", highlight=False)
    console.print(f"  Total time: {format_duration(summary.duration_ms / 1000)}", highlight=False)
    if summary.wall_seconds is not None:
        console.print(f"  Wall time: {format_duration(summary.wall_seconds)}", highlight=False)
    if summary.total_tokens:
        console.print(
            f"  Tokens: {summary.total_tokens} "
            f"(prompt {summary.prompt_tokens}, completion {summary.completion_tokens})",
            highlight=False,
        )
    if summary.cost_usd is not None or summary.role_cost_usd is not None:
        console.print(f"  Cost: {usd(summary.cost_usd)} agent under test, {usd(summary.role_cost_usd)} simulator, judge and generator", highlight=False)
    if summary.role_calls:
        console.print(f"  Role calls: {summary.role_calls} ({summary.cache_hits} from the cache)", highlight=False)
    if summary.repeated:
        for agent in summary.agents if summary.several_agents else [None]:
            _stability(console, summary, stability_rows, agent)


def print_quiet_summary(console: SafeConsole, summary: Summary, stability_rows: int, message: bool = False) -> None:
    """``-q``'s summary: after ``--runs N``, the Stability table of the cases that were not
    stable (none when all were), then one line as pytest's (:func:`summary_line`); ``message``:
    the line says that ``-i`` was read as a message, not a suite file."""
    if summary.repeated:
        for agent in summary.agents if summary.several_agents else [None]:
            _stability(console, summary, stability_rows, agent, unstable_only=True)
    line = summary_line(summary)
    console.print(line.append(" (-i was a message, not a suite file)") if message else line)


def summary_line(summary: Summary) -> Text:
    """The run in one line, as pytest ends ``-q``: ``48 passed, 2 failed, 1 error in 3.1s``
    (counts of none left out; "no case ran" when there were none)."""
    counts = [
        (summary.passed, "passed", "green"),
        (summary.failed, "failed", "red"),
        (summary.skipped, "skipped", "yellow"),
        (summary.errors, "error" if summary.errors == 1 else "errors", "red"),
        (summary.timeouts, "timeout" if summary.timeouts == 1 else "timeouts", "yellow"),
    ]
    line = Text()
    for count, label, style in (c for c in counts if c[0]):
        if line:
            line.append(", ")
        line.append(f"{count} {label}", style=style)
    if not line:
        line.append("no case ran", style="yellow")
    seconds = summary.wall_seconds if summary.wall_seconds is not None else summary.duration_ms / 1000
    return line.append(f" in {format_duration(seconds)}")


def _agents(console: SafeConsole, summary: Summary) -> None:
    """Each agent's counts, side by side, when the run tested several."""
    priced = any(entry.cost_usd is not None for entry in summary.agents.values())
    table = Table(title="Per agent", title_justify="left")
    for column, justify in (
        ("Agent", "left"), ("Total", "right"), ("Passed", "right"), ("Failed", "right"), ("Skipped", "right"),
        ("Errors", "right"), ("Timeouts", "right"), ("Pass rate", "right"), *((("Cost", "right"),) if priced else ()),
    ):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for agent, entry in summary.agents.items():
        counts = entry.counts
        rate = entry.pass_rate
        table.add_row(
            Text(one_line(agent or "(unnamed)")),
            str(entry.total),
            _count(counts[Status.PASSED], "green"),
            _count(counts[Status.FAILED], "red"),
            _count(counts[Status.SKIPPED], "yellow"),
            _count(counts[Status.ERROR], "red"),
            _count(counts[Status.TIMEOUT], "yellow"),
            "—" if rate is None else f"{rate:.0%}",
            *((usd(entry.cost_usd),) if priced else ()),
        )
    console.print()
    console.print(table)


def _stability(console: SafeConsole, summary: Summary, rows: int, agent: str | None, unstable_only: bool = False) -> None:
    stats = summary.stability(agent)
    if unstable_only and all(stat.stability_class == StabilityClass.STABLE for stat in stats.values()):
        return
    console.print()
    classes = summary.stability_counts(agent)
    of = f" of {one_line(agent or '(unnamed)')}" if agent is not None else ""
    console.print(Text(f"  Stability{of}: " + ", ".join(f"{count} {name}" for name, count in classes.items() if count)))
    any_pass = sum(stat.pass_at_k == 1.0 for stat in stats.values())
    console.print(Text(f"  pass@k (k = runs; passed in at least one of its k tries): {any_pass}/{len(stats)} cases"))

    suites = summary.several_suites  # an id may repeat across them: each case names its suite
    table = Table(title=f"Stability{of}", title_justify="left")
    for column, justify in (
        *((("Suite", "left"),) if suites else ()),
        ("Case", "left"),
        ("Runs", "right"),
        ("Passed", "right"),
        ("Pass rate", "right"),
        ("Class", "left"),
        ("pass@k", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    worst_first = sorted(stats.items(), key=lambda item: (item[1].pass_rate, item[0]))
    if unstable_only:
        worst_first = [(key, stat) for key, stat in worst_first if stat.stability_class != StabilityClass.STABLE]
    for (suite, case_id), stat in worst_first[:rows]:
        table.add_row(
            *((Text(one_line(suite or "(no suite)")),) if suites else ()),
            Text(one_line(case_id)),
            str(stat.runs),
            str(stat.passes),
            f"{stat.pass_rate:.0%}",
            Text(stat.stability_class, style=_CLASS_STYLE[stat.stability_class]),
            f"{stat.pass_at_k:.0f}",
        )
    console.print(table)
    hidden = len(worst_first) - rows
    if hidden > 0:
        console.print(Text(f"  … and {hidden} more cases", style="dim"))


def _of_roles(errors: int) -> str:
    """How many errors a role made (simulator, judge, ...): they fail the run, but are not the agent's."""
    if not errors:
        return ""
    return f" ({errors} of a role, not the agent's: left out of its pass rates)"


def _count(value: int, style: str) -> Text:
    return Text(str(value), style=style if value else "")
