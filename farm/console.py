"""The console reporter: the seed's banner, case trees, live progress and summary.

:class:`ConsoleReporter` prints to a :class:`rich.console.Console` the caller
builds (``Console(file=..., force_terminal=..., no_color=...)``), so the same
code writes colour to a terminal and plain text to a pipe or a test's
``StringIO``. Outside verbose mode a passed case is one line and only the
cases that need a look (failed, error, timeout, skipped) print their tree,
so a suite of thousands stays readable.

:meth:`ConsoleReporter.summary` prints a :class:`~farm.summary.Summary`, the
run's tally.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
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
from rich.table import Table
from rich.text import Text

from farm.assertions import describe
from farm.durations import format_duration
from farm.excerpts import clip
from farm.jsontext import arguments_text, json_text
from farm.messages import content_text
from farm.results import AssertionResult, CaseResult, CheckpointResult, StabilityClass, Status, TurnResult
from farm.secrets import scrub_result
from farm.summary import Summary

__all__ = ["ConsoleReporter", "neutralise"]

_CONTROLS = {c: 0x2400 + c for c in range(0x20) if c not in (0x09, 0x0A)}
_CONTROLS[0x7F] = 0x2421
_CONTROLS.update({c: 0xFFFD for c in range(0x80, 0xA0)})


def neutralise(text: str) -> str:
    """``text`` with terminal control characters (ESC, OSC, BEL, CR, C1...) shown as
    harmless symbols (ESC as ␛), one for one, so an agent's reply cannot drive the terminal."""
    return text.translate(_CONTROLS)


class _SafeConsole:
    """The reporter's console: everything it prints is neutralised (agent output and
    case ids are user text); emoji codes such as ``:100:`` print as they are."""

    def __init__(self, console: Console):
        self._console = console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._console, name)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        safe = []
        for item in objects:
            if isinstance(item, Text):
                item = item.copy()
                item.plain = neutralise(item.plain)
            elif isinstance(item, str):
                item = neutralise(item)
            safe.append(item)
        kwargs.setdefault("emoji", False)
        self._console.print(*safe, **kwargs)

#: Longest agent reply shown on an ``Agent:`` line.
REPLY_LIMIT = 100
#: Longest user input shown on a ``Turn k:`` line.
INPUT_LIMIT = 80
#: Longest expected value, tool argument list or message shown on one line.
VALUE_LIMIT = 80
MESSAGE_LIMIT = 200
#: Most lines of a golden diff the tree shows (the JSONL, JUnit and HTML keep it whole).
DIFF_LINES = 40
#: Width of the banner and section rules (the seed's), narrowed to the console.
RULE_WIDTH = 63

_STATUS_STYLE = {
    "PASSED": "green",
    "FAILED": "red",
    "ERROR": "red",
    "SKIPPED": "yellow",
    "TIMEOUT": "yellow",
}
_MARKERS = {"simulated": "[Simulated]", "human": "[Human]"}

# Between a tree item's head and its detail lines: the seed's "  │          ".
_BRANCH, _LAST = "  ├─ ", "  └─ "
_DETAIL, _LAST_DETAIL = "  │          ", "     "


# ---------------------------------------------------------------- reporter


LINES_AT_ONCE = 200
"""Passed cases' lines printed in one go at most."""

LINES_EVERY = 0.1
"""Seconds a passed case's line may wait to be printed with the next ones."""


class ConsoleReporter:
    """Prints a run to ``console``: :meth:`header`, :meth:`case` per result, :meth:`summary`.

    ``verbose`` prints every case's tree, passed ones too; ``stability_rows``
    caps the Stability table (the least stable cases come first).
    """

    def __init__(self, console: Console, verbose: bool = False, stability_rows: int = 20) -> None:
        self.console: Console = _SafeConsole(console)  # type: ignore[assignment]
        self._raw_console = console
        self.verbose = verbose
        self.stability_rows = stability_rows
        self._progress: Progress | None = None
        self._task: Any = None
        self._tally = Summary()  # the cases the progress line counted
        self._gap_needed = False  # compact lines were printed since the last blank line
        self._lines: list[Text] = []  # passed cases' lines not printed yet
        self._printed_at = 0.0  # the first line is printed at once

    # -- banner

    def header(self, agent: str, input_desc: str, count: int, extra: dict[str, str] | None = None) -> None:
        """The banner: agent, input with its case count, any ``extra`` lines, then the "Running Tests" rule."""
        self._section("Agent Test Farm", "═")
        cases = "test case" if count == 1 else "test cases"
        self._info("Agent", agent)
        self._info("Input", f"{input_desc} ({count} {cases})")
        for key, value in (extra or {}).items():
            self._info(key, value)
        self.console.print()
        self._section("Running Tests", "─")
        self.console.print()

    # -- one case

    def case(self, result: CaseResult) -> None:
        """Print one finished case: a line when it passed (unless verbose), else its tree."""
        scrub_result(result)  # already done by the writers' fan-out when it came first; cheap then
        if result.status == Status.PASSED and not self.verbose:
            line = Text()
            line.append("✓ ", style="green")
            line.append(f"[{result.id}]", style="bold")
            if result.name:
                line.append(f" {result.name}")
            line.append(f" ({_turns_label(result)}, {format_duration(result.duration_ms / 1000)})")
            line.append(_run_label(result), style="dim")
            for turn in result.turns:  # a pass with something to know, e.g. the tool loop stopped
                if turn.note:
                    line.append(f" — turn {turn.turn}: {turn.note}", style="yellow")
            self._lines.append(line)
            self._gap_needed = True
            if len(self._lines) >= LINES_AT_ONCE or time.monotonic() - self._printed_at >= LINES_EVERY:
                self.flush()
            return
        self.flush()
        self._gap()
        self._tree(result)

    def flush(self) -> None:
        """Print the passed cases' lines held back: one print for many lines costs a fraction
        of one print per line (Rich renders per call), which counted at thousands of cases."""
        if self._lines:
            self.console.print(Text("\n").join(self._lines), soft_wrap=True)
            self._lines.clear()
        self._printed_at = time.monotonic()

    def _tree(self, result: CaseResult) -> None:
        head = Text()
        head.append("► ")
        head.append(f"[{result.id}]", style="bold")
        if result.name:
            head.append(f" {result.name}")
        head.append(f" ({_turns_label(result)})")
        head.append(_run_label(result), style="dim")
        self.console.print(head)

        items: list[tuple[Text, list[Text]]] = []
        last_turn = len(result.turns)
        for turn in result.turns:
            items.append(self._turn_item(result, turn, is_last=turn.turn == last_turn))
        if result.awaiting_question is not None:
            items.append(self._awaiting_item(result))
        if result.checkpoints:
            items.append(self._checkpoints_item(result.checkpoints))
        if result.final_assertions:
            finals_ok = all(a.passed for a in result.final_assertions)
            head_line = Text("Final Assertions: ")
            head_line.append_text(_status_word("PASSED" if finals_ok else "FAILED"))
            items.append((head_line, [line for a in result.final_assertions for line in (_assertion_line(a), *_diff_lines(a))]))
        if self._needs_result_line(result):
            items.append((self._result_line(result), []))

        for index, (item_head, details) in enumerate(items):
            last = index == len(items) - 1
            under = _LAST_DETAIL if last else _DETAIL
            self._emit(_LAST if last else _BRANCH, under, item_head)
            for detail in details:
                self._emit(under, under, detail)
            if details and not last:
                self.console.print("  │")
        self.console.print()
        self._gap_needed = False

    def _turn_item(self, result: CaseResult, turn: TurnResult, is_last: bool) -> tuple[Text, list[Text]]:
        head = Text(f"Turn {turn.turn}: ")
        marker = _MARKERS.get(turn.input_source)
        if marker is None and result.mode == "dynamic":
            marker = "[Initial]"
        if marker:
            head.append(f"{marker} ", style="cyan")
        head.append(_quote(_input_text(turn.input), INPUT_LIMIT))
        head.append(" → ")
        head.append_text(_status_word(_turn_status(result, turn, is_last)))
        head.append(f" ({format_duration(turn.duration_ms / 1000)})", style="dim")

        details = list(_agent_lines(turn))
        if self.verbose and turn.simulator_reasoning:
            details.append(Text(f"Simulator: {_clip(turn.simulator_reasoning, REPLY_LIMIT)}", style="dim"))
        if turn.note:
            details.append(Text(f"Note: {turn.note}", style="yellow"))
        if turn.error:
            details.append(Text(f"Error: {_clip(turn.error, MESSAGE_LIMIT)}", style="red"))
        for assertion in turn.assertions:
            details += [_assertion_line(assertion), *_diff_lines(assertion)]
        return head, details

    def _awaiting_item(self, result: CaseResult) -> tuple[Text, list[Text]]:
        head = Text(f"Turn {len(result.turns) + 1}: ")
        head.append_text(_status_word(_word(result.status)))
        details = []
        if result.error:
            details.append(Text(f"Reason: {_clip(result.error, MESSAGE_LIMIT)}"))
        details.append(Text(f"Agent asked: {_quote(result.awaiting_question or '', REPLY_LIMIT)}"))
        if result.hint:
            details.append(Text(f"Hint: {_clip(result.hint, MESSAGE_LIMIT)}", style="dim"))
        return head, details

    def _checkpoints_item(self, checkpoints: list[CheckpointResult]) -> tuple[Text, list[Text]]:
        required = [c for c in checkpoints if c.required]
        reached = sum(c.reached for c in required)
        head = Text(f"Checkpoints: {reached}/{len(required)} required reached")
        lines = []
        for checkpoint in checkpoints:
            line = Text()
            if checkpoint.reached:
                line.append("✓ ", style="green")
                line.append(f"{checkpoint.id} reached at turn {checkpoint.reached_at_turn}")
            elif checkpoint.required:
                line.append("✗ ", style="red")
                line.append(f"{checkpoint.id} not reached")
            else:
                line.append("○ ", style="dim")
                line.append(f"{checkpoint.id} not reached (optional)")
            if checkpoint.description:
                line.append(f" — {_clip(checkpoint.description, VALUE_LIMIT)}", style="dim")
            lines.append(line)
        return head, lines

    @staticmethod
    def _needs_result_line(result: CaseResult) -> bool:
        if not result.final_assertions:
            return True
        # Failed final assertions already say why; anything else still needs its line.
        finals_failed = not all(a.passed for a in result.final_assertions)
        return result.status != Status.PASSED and not (result.status == Status.FAILED and finals_failed)

    @staticmethod
    def _result_line(result: CaseResult) -> Text:
        line = Text("Result: ")
        line.append_text(_status_word(_word(result.status)))
        if result.status == Status.PASSED:
            line.append(f" ({format_duration(result.duration_ms / 1000)})", style="dim")
        elif result.error and result.awaiting_question is None:  # the awaiting block gave the reason
            line.append(f": {_clip(result.error, MESSAGE_LIMIT)}")
        return line

    # -- live progress

    def start_progress(self, total: int) -> None:
        """Show a transient progress line for ``total`` cases (terminals only)."""
        self._tally = Summary()
        if not self.console.is_terminal or self._progress is not None:
            return
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.fields[phase]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/]"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self._raw_console,
            transient=True,
        )
        self._task = self._progress.add_task("cases", total=total, passed=0, failed=0, phase="Running")
        self._progress.start()

    def phase(self, text: str) -> None:
        """Say on the progress line what the run is doing ("starting Ray…", "running")."""
        if self._progress is not None:
            self._progress.update(self._task, phase=escape(text[:1].upper() + text[1:]))

    def advance(self, result: CaseResult) -> None:
        """Count one finished case on the progress line."""
        self._tally.add(result)
        self.progress(self._tally.total, None, self._tally.count_dict())

    def progress(self, done: int, total: int | None, counts: dict[str, int]) -> None:
        """Set the progress line to ``done`` of ``total`` with ``counts`` per status value."""
        if self._progress is None:
            return
        failed = sum(counts.get(s.value, 0) for s in (Status.FAILED, Status.ERROR, Status.TIMEOUT))
        self._progress.update(
            self._task, completed=done, total=total, passed=counts.get(Status.PASSED.value, 0), failed=failed
        )

    def stop_progress(self) -> None:
        """Remove the progress line (printing the lines held back first)."""
        self.flush()
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
            self._task = None

    # -- summary

    def summary(self, summary: Summary, outputs: Iterable[str] = ()) -> None:
        """The seed's Summary block, a Stability table after ``--runs N``, then ``outputs`` lines."""
        self._gap()
        self._section("Summary", "─")
        rows = [
            ("Total", Text(f"{summary.total} {'test' if summary.total == 1 else 'tests'}")),
            ("Passed", _count(summary.passed, "green")),
            ("Failed", _count(summary.failed, "red")),
            ("Skipped", _count(summary.skipped, "yellow")),
            ("Errors", _count(summary.errors, "red")),
            ("Timeouts", _count(summary.timeouts, "yellow")),
        ]
        width = max(len(label) for label, _ in rows) + 2
        for label, value in rows:
            self.console.print(Text(f"  {label + ':':<{width}}").append_text(value))
        self.console.print()
        self.console.print(f"  Total turns: {summary.total_turns}", highlight=False)
        self.console.print(f"  Avg turns/test: {summary.avg_turns:.1f}", highlight=False)
        self.console.print(f"  Total time: {format_duration(summary.duration_ms / 1000)}", highlight=False)
        if summary.wall_seconds is not None:
            self.console.print(f"  Wall time: {format_duration(summary.wall_seconds)}", highlight=False)
        if summary.total_tokens:
            self.console.print(
                f"  Tokens: {summary.total_tokens} "
                f"(prompt {summary.prompt_tokens}, completion {summary.completion_tokens})",
                highlight=False,
            )
        if summary.role_calls:
            self.console.print(f"  Role calls: {summary.role_calls} ({summary.cache_hits} from the cache)", highlight=False)
        if summary.repeated:
            self._stability(summary)
        lines = list(outputs)
        if lines:
            self.console.print()
            for line in lines:
                self.console.print(Text(f"  {line}"), soft_wrap=True)

    def _stability(self, summary: Summary) -> None:
        stats = summary.stability()
        self.console.print()
        classes = summary.stability_counts()
        self.console.print(Text("  Stability: " + ", ".join(f"{count} {name}" for name, count in classes.items() if count)))
        any_pass = sum(stat.pass_at_k == 1.0 for stat in stats.values())
        self.console.print(Text(f"  pass@k (k = runs): {any_pass}/{len(stats)} cases"))

        table = Table(title="Stability", title_justify="left")
        for column, justify in (
            ("Case", "left"),
            ("Runs", "right"),
            ("Passed", "right"),
            ("Pass rate", "right"),
            ("Class", "left"),
            ("pass@k", "right"),
        ):
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        worst_first = sorted(stats.items(), key=lambda item: (item[1].pass_rate, item[0]))
        for case_id, stat in worst_first[: self.stability_rows]:
            table.add_row(
                Text(neutralise(case_id)),
                str(stat.runs),
                str(stat.passes),
                f"{stat.pass_rate:.0%}",
                Text(stat.stability_class, style=_CLASS_STYLE[stat.stability_class]),
                f"{stat.pass_at_k:.0f}",
            )
        self.console.print(table)
        hidden = len(worst_first) - self.stability_rows
        if hidden > 0:
            self.console.print(Text(f"  … and {hidden} more cases", style="dim"))

    # -- helpers

    def _emit(self, first: str, rest: str, text: Text) -> None:
        """Print ``text`` after ``first``, wrapped so continuation lines keep the tree's ``rest`` prefix."""
        width = max(self.console.width - len(first), 20)
        for number, line in enumerate(text.wrap(self._raw_console, width)):
            line.rstrip()
            self.console.print(Text(rest if number else first).append_text(line), no_wrap=True, overflow="crop")

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


_CLASS_STYLE = {
    StabilityClass.STABLE: "green",
    StabilityClass.MOSTLY_STABLE: "green",
    StabilityClass.UNSTABLE: "yellow",
    StabilityClass.HIGHLY_UNSTABLE: "red",
    StabilityClass.CONSISTENTLY_FAILING: "red",
}


def _word(status: Status | str) -> str:
    return Status(status).value.upper()


def _status_word(word: str) -> Text:
    return Text(word, style=_STATUS_STYLE.get(word, ""))


def _count(value: int, style: str) -> Text:
    return Text(str(value), style=style if value else "")


def _turn_count(result: CaseResult) -> int:
    return result.total_turns or len(result.turns)


def _turns_label(result: CaseResult) -> str:
    count = _turn_count(result)
    return f"{count} turn" if count == 1 else f"{count} turns"


def _run_label(result: CaseResult) -> str:
    parts = []
    if result.run_index:
        parts.append(f"run {result.run_index + 1}")
    if result.attempt > 1:
        parts.append(f"attempt {result.attempt}")
    return f" [{', '.join(parts)}]" if parts else ""


def _turn_status(result: CaseResult, turn: TurnResult, is_last: bool) -> str:
    if turn.error:
        return "TIMEOUT" if is_last and result.status == Status.TIMEOUT else "ERROR"
    if any(a.error for a in turn.assertions):
        return "ERROR"
    if not all(a.passed for a in turn.assertions):
        return "FAILED"
    return "PASSED"


def _clip(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    return clip(" ".join(str(text).split()), limit)


def _quote(text: str, limit: int) -> str:
    return f'"{_clip(text, limit)}"'


def _input_text(value: Any) -> str:
    """The user input as one line: a string, a message's content, or the last user message."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _content_text(value.get("content", value))
    if isinstance(value, list):
        users = [m for m in value if isinstance(m, dict) and m.get("role", "user") == "user"]
        if users:
            return _content_text(users[-1].get("content"))
    return json_text(value)


def _content_text(content: Any) -> str:
    return content_text(content, separator=" ", others="mark") if isinstance(content, (str, list)) else json_text(content)


def _args_text(args: Any) -> str:
    return _clip(arguments_text(args), VALUE_LIMIT)


def _agent_lines(turn: TurnResult) -> Iterable[Text]:
    if turn.tool_calls:
        calls = ", ".join(f"[tool: {call.name}({_args_text(call.args)})]" for call in turn.tool_calls)
        yield Text(f"Agent: {calls}")
    if turn.output or not (turn.tool_calls or turn.error):
        yield Text(f"Agent: {_quote(turn.output, REPLY_LIMIT)}" if turn.output else "Agent: (no reply)")


def _describe(assertion: AssertionResult) -> str:
    """What an assertion checks, as the seed lists it: ``contains "x"``, ``$.a.b = "y"``."""
    prefix = "NOT " if assertion.negate else ""
    return prefix + _clip(describe(assertion.type, assertion.expected), VALUE_LIMIT)


def _assertion_line(assertion: AssertionResult) -> Text:
    line = Text()
    if assertion.passed:
        line.append("✓ ", style="green")
        line.append(_describe(assertion))
    else:
        line.append("✗ ", style="red")
        line.append(_describe(assertion))
        if assertion.message:
            line.append(f" — {_clip(assertion.message, MESSAGE_LIMIT)}", style="red")
    if assertion.score is not None:
        line.append(f" (score {assertion.score:g})", style="dim")
    return line


def _diff_lines(assertion: AssertionResult) -> list[Text]:
    """A failed assertion's diff (a golden conversation's), one literal line each, at most :data:`DIFF_LINES`."""
    if not assertion.diff:
        return []
    lines = assertion.diff.splitlines()
    out = []
    for line in lines[:DIFF_LINES]:
        removed, added = line.startswith("-") and not line.startswith("---"), line.startswith("+") and not line.startswith("+++")
        out.append(Text("  " + _clip(line, MESSAGE_LIMIT), style="red" if removed else "green" if added else "dim"))
    if len(lines) > DIFF_LINES:
        out.append(Text(f"  … {len(lines) - DIFF_LINES} more diff lines", style="dim"))
    return out
