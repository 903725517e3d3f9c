"""A case as the console shows it: one line for a passed case, else a tree of its turns,
checkpoints, final assertions and result, in the seed's layout.

Every value a line shows (a reply, an input, an assertion's message) is cut to one line
of a bounded length here; the JSONL keeps them whole. An error or a failure's message
keeps its start and its end, where the cause is; with ``-v`` it is shown whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text

from farm.assertions import describe
from farm.console.safe import SafeConsole, one_line
from farm.durations import format_duration
from farm.excerpts import clip, clip_middle
from farm.jsontext import arguments_text, json_text
from farm.messages import content_text
from farm.results import SIM_FLAGS, AssertionResult, CaseResult, CheckpointResult, Status, TurnResult

__all__ = ["failure_line", "passed_line", "print_tree"]

#: Longest agent reply shown on an ``Agent:`` line.
REPLY_LIMIT = 100
#: Longest user input shown on a ``Turn k:`` line.
INPUT_LIMIT = 80
#: Longest expected value, tool argument list or message shown on one line.
VALUE_LIMIT = 80
#: Longest error or failure message shown without ``-v`` (its start and its end).
MESSAGE_LIMIT = 300
#: Most lines of a golden diff the tree shows (the JSONL, JUnit and HTML keep it whole).
DIFF_LINES = 40
#: The note on a turn whose reply the model cut at its token limit, passed or not.
TRUNCATED_NOTE = "the reply was cut at the model's token limit (finish_reason: length)"

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

Item = tuple[Text, list[Text]]
"""A tree item: its head line and its detail lines."""


def passed_line(result: CaseResult, show_agent: bool = False, show_suite: bool = False) -> Text:
    """A passed case on one line: id, name, turns, duration, run label and any turn's note;
    ``show_agent``: the agent under test beside the mark (a run that tests several); ``show_suite``:
    the case's suite before its id (a run of several suites, where an id may repeat)."""
    line = Text()
    line.append("✓ ", style="green")
    if show_agent:
        line.append(_agent_label(result))
    _append_title(line, result, show_suite)
    line.append(f" ({_turns_label(result)}, {format_duration(result.duration_ms / 1000)})")
    line.append(_run_label(result), style="dim")
    for turn in result.turns:  # a pass with something to know, e.g. the tool loop stopped
        for note in _notes(turn):
            line.append(f" — turn {turn.turn}: {note}", style="yellow")
    return line


def failure_line(result: CaseResult, verbose: bool = False, show_agent: bool = False, show_suite: bool = False) -> Text:
    """A case that did not pass, on one line (``-q``): its id (and agent, and suite), status and why."""
    line = Text()
    line.append("✗ ", style=_STATUS_STYLE.get(_word(result.status), "red"))
    if show_agent:
        line.append_text(_agent_label(result))
    if show_suite:
        line.append_text(_suite_label(result))
    line.append(f"[{one_line(result.id)}]", style="bold")
    line.append(_run_label(result), style="dim")
    line.append(" ")
    line.append_text(_status_word(_word(result.status)))
    why = result.error or next((f"{a.type}: {a.message}" for a in _failed_assertions(result)), None)
    if why:
        line.append(f": {_message(why, verbose)}")
    if result.blame:
        line.append(f" — blame: {result.blame}", style="magenta")
    return line


def _failed_assertions(result: CaseResult) -> Iterable[AssertionResult]:
    for turn in result.turns:
        yield from (a for a in turn.assertions if not a.passed)
    yield from (a for a in result.final_assertions if not a.passed)


def print_tree(console: SafeConsole, result: CaseResult, verbose: bool, show_agent: bool = False, show_suite: bool = False) -> None:
    """Print ``result`` as a tree; ``verbose`` adds the simulator's reasoning to dynamic turns and
    shows errors and failure messages whole; ``show_agent`` names the agent under test on the head
    and the result line; ``show_suite`` the case's suite on the head."""
    head = Text()
    head.append("► ")
    if show_agent:
        head.append(_agent_label(result))
    _append_title(head, result, show_suite)
    head.append(f" ({_stopped_label(result) or _turns_label(result)})")
    head.append(_run_label(result), style="dim")
    console.print(head)

    items: list[Item] = []
    last_turn = len(result.turns)
    for turn in result.turns:
        items.append(_turn_item(result, turn, turn.turn == last_turn, verbose))
    if result.awaiting_question is not None:
        items.append(_awaiting_item(result, verbose))
    broken = result.status in (Status.ERROR, Status.TIMEOUT) and bool(result.checkpoints)
    if broken:  # its cause first: the checkpoints it did not reach follow from it
        items.append((_result_line(result, verbose, show_agent), _role_tracebacks(result, verbose)))
    if result.checkpoints:
        items.append(_checkpoints_item(result.checkpoints))
    if result.final_assertions:
        finals_ok = all(a.passed for a in result.final_assertions)
        head_line = Text("Final Assertions: ")
        head_line.append_text(_status_word("PASSED" if finals_ok else "FAILED"))
        items.append((head_line, [line for a in result.final_assertions for line in (_assertion_line(a, verbose), *_diff_lines(a))]))
    if (_needs_result_line(result) or show_agent) and not broken:
        items.append((_result_line(result, verbose, show_agent), _role_tracebacks(result, verbose)))

    for index, (item_head, details) in enumerate(items):
        last = index == len(items) - 1
        under = _LAST_DETAIL if last else _DETAIL
        _emit(console, _LAST if last else _BRANCH, under, item_head)
        for detail in details:
            _emit(console, under, under, detail)
        if details and not last:
            console.print("  │")
    console.print()


def _turn_item(result: CaseResult, turn: TurnResult, is_last: bool, verbose: bool) -> Item:
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
    if verbose and turn.simulator_reasoning:
        details.append(Text(f"Simulator: {_clip(turn.simulator_reasoning, REPLY_LIMIT)}", style="dim"))
    details += [Text(f"Note: {note}", style="yellow") for note in _notes(turn)]
    if turn.sim_flags:
        details.append(Text(f"Simulator flags: {sim_flags_text(turn.sim_flags)}", style="magenta"))
    if turn.error:
        details.append(Text(f"Error: {_message(turn.error, verbose)}", style="red"))
        if verbose and turn.traceback:
            details += [Text(line, style="red") for line in turn.traceback.splitlines()]
    for assertion in turn.assertions:
        details += [_assertion_line(assertion, verbose), *_diff_lines(assertion)]
    return head, details


def sim_flags_text(flags: list[str]) -> str:
    """A turn's simulator flags as people read them: ``repeat (repeated an earlier user turn word for word)``."""
    return "; ".join(f"{flag} ({SIM_FLAGS[flag]})" if flag in SIM_FLAGS else flag for flag in flags)


def _notes(turn: TurnResult) -> list[str]:
    """What is worth knowing about ``turn`` that is no error, passed or not."""
    notes = [turn.note] if turn.note else []
    if turn.truncated:
        notes.append(TRUNCATED_NOTE)
    return notes


def _awaiting_item(result: CaseResult, verbose: bool) -> Item:
    head = Text(f"Turn {len(result.turns) + 1}: ")
    head.append_text(_status_word(_word(result.status)))
    details = []
    if result.error:
        details.append(Text(f"Reason: {_message(result.error, verbose)}"))
    details.append(Text(f"Agent asked: {_quote(result.awaiting_question or '', REPLY_LIMIT)}"))
    if result.hint:
        details.append(Text(f"Hint: {_clip(result.hint, MESSAGE_LIMIT)}", style="dim"))
    return head, details


def _checkpoints_item(checkpoints: list[CheckpointResult]) -> Item:
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


def _needs_result_line(result: CaseResult) -> bool:
    if not result.final_assertions:
        return True
    # Failed final assertions already say why; anything else still needs its line.
    finals_failed = not all(a.passed for a in result.final_assertions)
    return result.status != Status.PASSED and not (result.status == Status.FAILED and finals_failed)


def _append_title(line: Text, result: CaseResult, show_suite: bool = False) -> None:
    """The case's id and name (and suite), each on this line whatever they hold (they may be generated)."""
    if show_suite:
        line.append_text(_suite_label(result))
    line.append(f"[{one_line(result.id)}]", style="bold")
    if result.name:
        line.append(f" {one_line(result.name)}")


def _suite_label(result: CaseResult) -> Text:
    return Text(f"{one_line(clip(result.suite or '(no suite)', VALUE_LIMIT))} ", style="dim")


def _agent_label(result: CaseResult) -> Text:
    return Text(f"{one_line(clip(result.agent or '(unnamed)', VALUE_LIMIT))} ", style="cyan")


def _role_tracebacks(result: CaseResult, verbose: bool) -> list[Text]:
    """With ``-v``: where a python role agent (a simulator, a judge) raised, its own frames."""
    if not verbose:
        return []
    lines = []
    for call in result.role_log:
        if call.traceback:
            lines.append(Text(f"The {call.role} ({call.agent}) raised:", style="red"))
            lines += [Text(line, style="red") for line in call.traceback.splitlines()]
    return lines


def _result_line(result: CaseResult, verbose: bool, show_agent: bool = False) -> Text:
    line = Text("Result: ")
    line.append_text(_status_word(_word(result.status)))
    if show_agent:
        line.append(" on ")
        line.append(one_line(clip(result.agent or "(unnamed)", VALUE_LIMIT)), style="cyan")
    if result.status == Status.PASSED:
        line.append(f" ({format_duration(result.duration_ms / 1000)})", style="dim")
    elif result.error and result.awaiting_question is None:  # the awaiting block gave the reason
        line.append(f": {_message(result.error, verbose)}")
    if result.blame:
        line.append(f" — blame: {result.blame} ({_message(result.blame_reason or '', verbose)})", style="magenta")
    return line


def _emit(console: SafeConsole, first: str, rest: str, text: Text) -> None:
    """Print ``text`` after ``first``, wrapped so continuation lines keep the tree's ``rest`` prefix."""
    width = max(console.width - len(first), 20)
    for number, line in enumerate(text.wrap(console.raw, width)):
        line.rstrip()
        console.print(Text(rest if number else first).append_text(line), no_wrap=True, overflow="crop")


def _word(status: Status | str) -> str:
    return Status(status).value.upper()


def _status_word(word: str) -> Text:
    return Text(word, style=_STATUS_STYLE.get(word, ""))


def _turn_count(result: CaseResult) -> int:
    return result.total_turns or len(result.turns)


def _turns_label(result: CaseResult) -> str:
    count = _turn_count(result)
    return f"{count} turn" if count == 1 else f"{count} turns"


def _stopped_label(result: CaseResult) -> str | None:
    """"stopped at turn k" when a turn's error or verdict (or the simulator, or the case's timeout)
    ended a conversation that had more to go: its turn count alone would read as the case's length."""
    if result.mode == "single" or not result.turns:
        return None
    last = result.turns[-1]
    if result.ended_by is not None or last.error or any(not a.passed for a in last.assertions):
        return f"stopped at turn {last.turn}"
    return None


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


def _message(text: str, verbose: bool) -> str:
    """An error or a failure's message on one line: whole with ``-v``, else its start and its
    end (where the cause is), :data:`MESSAGE_LIMIT` characters in all."""
    line = " ".join(str(text).split())
    return line if verbose else clip_middle(line, MESSAGE_LIMIT)


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


def _assertion_line(assertion: AssertionResult, verbose: bool = False) -> Text:
    line = Text()
    if assertion.passed:
        line.append("✓ ", style="green")
        line.append(_describe(assertion))
    elif assertion.error:  # it could not be judged (a judge failed, no span came): no verdict on the agent
        line.append("! ", style="yellow")
        line.append(_describe(assertion))
        line.append(f" — ERROR: {_message(assertion.message or 'it could not be evaluated', verbose)}", style="yellow")
    else:
        line.append("✗ ", style="red")
        line.append(_describe(assertion))
        if assertion.message:
            line.append(f" — {_message(assertion.message, verbose)}", style="red")
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
