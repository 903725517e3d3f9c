"""The console reporter, rendered as plain text into a StringIO."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from farm.console import ConsoleReporter
from farm.console.safe import SafeConsole
from farm.console.tree import passed_line
from farm.results import (
    AssertionResult,
    CaseResult,
    CheckpointResult,
    Status,
    ToolCallRecord,
    TurnResult,
    Usage,
)
from farm.summary import Summary
from tests.factories import case_result


def plain_console() -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=False, color_system=None)


def text_of(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.fixture
def console() -> Console:
    return plain_console()


def passed_case() -> CaseResult:
    return case_result(
        "T001",
        Status.PASSED,
        name="Expense Reimbursement Flow",
        duration_ms=7100,
        turns=[
            TurnResult(
                turn=1,
                input="I want to submit an expense",
                output="What type of expense would you like to submit?",
                duration_ms=2100,
                assertions=[AssertionResult(type="contains", expected="type of expense", passed=True)],
            ),
            TurnResult(
                turn=2,
                input={"role": "user", "content": "Business travel, $3500"},
                tool_calls=[ToolCallRecord(name="create_expense", args={"amount": 3500, "type": "travel"})],
                duration_ms=3200,
                assertions=[AssertionResult(type="tool_called", expected="create_expense", passed=True)],
            ),
            TurnResult(turn=3, input="Yes, confirm", output="Expense submitted.", duration_ms=1800),
        ],
        final_assertions=[
            AssertionResult(type="json_path", expected={"path": "$.expense.status", "value": "submitted"}, passed=True)
        ],
    )


def failed_case() -> CaseResult:
    return case_result(
        "T004",
        Status.FAILED,
        name="Refund",
        duration_ms=900,
        error="turn 1: an assertion failed",
        turns=[
            TurnResult(
                turn=1,
                input="I want a refund",
                output="Hello there",
                duration_ms=900,
                assertions=[
                    AssertionResult(type="contains", expected="hello", passed=True, actual="Hello there"),
                    AssertionResult(type="contains", expected="refund", passed=False, message="reply does not contain 'refund'"),
                ],
            )
        ],
    )


def skipped_awaiting_case() -> CaseResult:
    return case_result(
        "T002",
        Status.SKIPPED,
        name="Large Expense Approval",
        duration_ms=2000,
        turns=[
            TurnResult(
                turn=1,
                input="Submit $100,000 equipment purchase",
                output="This requires manager approval. Please provide PO number.",
                duration_ms=2000,
                awaiting_input=True,
            )
        ],
        error="Agent awaiting input, no next turn defined",
        awaiting_question="Please provide PO number",
        hint="Add more turns, use --interactive, or configure simulator",
    )


def dynamic_case() -> CaseResult:
    return case_result(
        "T003",
        Status.FAILED,
        name="Dynamic Expense Flow",
        mode="dynamic",
        duration_ms=4900,
        error="agent completed with checkpoints missing: confirm",
        turns=[
            TurnResult(turn=1, input="Help me file an expense", output="Sure, what type?", duration_ms=2100),
            TurnResult(
                turn=2,
                input="It's for client dinner, $250",
                input_source="simulated",
                output="Done.",
                duration_ms=2800,
                simulator_reasoning="the user gives the details",
            ),
        ],
        checkpoints=[
            CheckpointResult(id="ask_type", reached=True, reached_at_turn=1),
            CheckpointResult(id="confirm"),
            CheckpointResult(id="thanks", required=False),
        ],
    )


def lines_of(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


# ---------------------------------------------------------------- header


def test_header_shows_agent_input_count_and_extra_lines(console: Console) -> None:
    ConsoleReporter(console).header("assistants.expense", "./tests/flow.jsonl", 5, {"Ray": "local", "Actors": "4"})
    text = text_of(console)
    assert "Agent Test Farm" in text
    assert "ℹ Agent: assistants.expense" in text
    assert "ℹ Input: ./tests/flow.jsonl (5 test cases)" in text
    assert "ℹ Ray: local" in text and "ℹ Actors: 4" in text
    assert text.index("Agent Test Farm") < text.index("Running Tests")


def test_header_singular_case(console: Console) -> None:
    ConsoleReporter(console).header("a", "x.jsonl", 1)
    assert "(1 test case)" in text_of(console)


# ---------------------------------------------------------------- cases


def test_passed_case_is_one_compact_line(console: Console) -> None:
    ConsoleReporter(console).case(passed_case())
    lines = [line for line in lines_of(text_of(console)) if line]
    assert lines == ["✓ [T001] Expense Reimbursement Flow (3 turns, 7.1s)"]


def test_passed_lines_held_back_come_out_in_order(console: Console) -> None:
    reporter = ConsoleReporter(console)
    for case_id in ("A1", "A2", "A3"):
        reporter.case(passed_case().model_copy(update={"id": case_id}))
    reporter.case(failed_case())  # a tree prints what was held back before it
    ids = [line.split("]")[0] for line in lines_of(text_of(console)) if line.startswith(("✓", "►"))]
    assert ids == ["✓ [A1", "✓ [A2", "✓ [A3", "► [T004"]


def test_verbose_prints_the_passed_tree(console: Console) -> None:
    ConsoleReporter(console, verbose=True).case(passed_case())
    lines = lines_of(text_of(console))
    assert lines[0] == "► [T001] Expense Reimbursement Flow (3 turns)"
    assert '  ├─ Turn 1: "I want to submit an expense" → PASSED (2.1s)' in lines
    assert '  │          Agent: "What type of expense would you like to submit?"' in lines
    assert '  │          ✓ contains "type of expense"' in lines
    assert '  ├─ Turn 2: "Business travel, $3500" → PASSED (3.2s)' in lines
    assert '  │          ✓ tool_called "create_expense"' in lines
    assert "  └─ Final Assertions: PASSED" in lines
    assert '     ✓ $.expense.status = "submitted"' in lines
    assert not any("Result:" in line for line in lines)


def test_tool_call_agent_line(console: Console) -> None:
    ConsoleReporter(console, verbose=True).case(passed_case())
    assert '  │          Agent: [tool: create_expense({amount: 3500, type: "travel"})]' in lines_of(text_of(console))


def test_failed_case_prints_tree_with_cross_and_message(console: Console) -> None:
    ConsoleReporter(console).case(failed_case())
    lines = lines_of(text_of(console))
    assert lines[0] == "► [T004] Refund (stopped at turn 1)"
    assert '  ├─ Turn 1: "I want a refund" → FAILED (900ms)' in lines
    assert '  │          ✓ contains "hello"' in lines
    assert "  │          ✗ contains \"refund\" — reply does not contain 'refund'" in lines
    assert "  └─ Result: FAILED: turn 1: an assertion failed" in lines


def test_skipped_awaiting_block(console: Console) -> None:
    ConsoleReporter(console).case(skipped_awaiting_case())
    lines = lines_of(text_of(console))
    expected = [
        "► [T002] Large Expense Approval (1 turn)",
        '  ├─ Turn 1: "Submit $100,000 equipment purchase" → PASSED (2.0s)',
        '  │          Agent: "This requires manager approval. Please provide PO number."',
        "  │",
        "  ├─ Turn 2: SKIPPED",
        "  │          Reason: Agent awaiting input, no next turn defined",
        '  │          Agent asked: "Please provide PO number"',
        "  │          Hint: Add more turns, use --interactive, or configure simulator",
        "  │",
        "  └─ Result: SKIPPED",
    ]
    assert lines[: len(expected)] == expected


def test_dynamic_markers_and_checkpoints(console: Console) -> None:
    ConsoleReporter(console).case(dynamic_case())
    lines = lines_of(text_of(console))
    assert '  ├─ Turn 1: [Initial] "Help me file an expense" → PASSED (2.1s)' in lines
    assert '  ├─ Turn 2: [Simulated] "It\'s for client dinner, $250" → PASSED (2.8s)' in lines
    assert "  ├─ Checkpoints: 1/2 required reached" in lines
    assert "  │          ✓ ask_type reached at turn 1" in lines
    assert "  │          ✗ confirm not reached" in lines
    assert "  │          ○ thanks not reached (optional)" in lines
    assert "  └─ Result: FAILED: agent completed with checkpoints missing: confirm" in lines
    # The simulator's reasoning is for verbose mode only.
    assert not any("Simulator:" in line for line in lines)


def test_verbose_shows_simulator_reasoning(console: Console) -> None:
    ConsoleReporter(console, verbose=True).case(dynamic_case())
    assert "  │          Simulator: the user gives the details" in lines_of(text_of(console))


def test_human_marker_and_long_reply_truncated(console: Console) -> None:
    result = CaseResult(
        id="H1",
        status=Status.FAILED,
        mode="static",
        turns=[TurnResult(turn=1, input="hi", input_source="human", output="x" * 300, duration_ms=10)],
        error="boom",
    )
    ConsoleReporter(console).case(result)
    text = text_of(console)
    assert '[Human] "hi"' in text
    assert text.count("x") == 99 and "x…" in text
    # A line longer than the console wraps under the tree's bar, not at column 0.
    tree = lines_of(text)[1:]
    agent_at = next(i for i, line in enumerate(tree) if "Agent:" in line)
    assert tree[agent_at + 1].startswith("  │          ") and "x" in tree[agent_at + 1]
    assert all(len(line) <= 120 for line in tree)


def test_failed_final_assertions_replace_the_result_line(console: Console) -> None:
    result = CaseResult(
        id="F1",
        status=Status.FAILED,
        mode="static",
        turns=[TurnResult(turn=1, input="go", output="ok", duration_ms=100)],
        final_assertions=[
            AssertionResult(
                type="json_path",
                expected={"path": "$.expense.status", "value": "submitted"},
                passed=False,
                message="$.expense.status is 'draft'",
            )
        ],
        error="final assertions failed",
    )
    ConsoleReporter(console).case(result)
    lines = lines_of(text_of(console))
    assert "  └─ Final Assertions: FAILED" in lines
    assert "     ✗ $.expense.status = \"submitted\" — $.expense.status is 'draft'" in lines
    assert not any("Result:" in line for line in lines)


def test_error_case_without_turns_and_markup_is_not_interpreted(console: Console) -> None:
    result = CaseResult(id="E1", status=Status.ERROR, error="unknown assertion type '[bold]x[/bold]'")
    ConsoleReporter(console).case(result)
    lines = lines_of(text_of(console))
    assert lines[0] == "► [E1] (0 turns)"
    assert lines[1] == "  └─ Result: ERROR: unknown assertion type '[bold]x[/bold]'"


def test_timeout_on_last_turn(console: Console) -> None:
    result = CaseResult(
        id="TO",
        status=Status.TIMEOUT,
        turns=[TurnResult(turn=1, input="slow", error="timed out after 30s", duration_ms=30000)],
        error="case timed out after 30s",
    )
    ConsoleReporter(console).case(result)
    lines = lines_of(text_of(console))
    assert '  ├─ Turn 1: "slow" → TIMEOUT (30.0s)' in lines
    assert "  │          Error: timed out after 30s" in lines
    assert "  └─ Result: TIMEOUT: case timed out after 30s" in lines


def test_compact_lines_then_tree_are_separated(console: Console) -> None:
    reporter = ConsoleReporter(console)
    reporter.case(passed_case())
    reporter.case(failed_case())
    lines = lines_of(text_of(console))
    assert lines[0].startswith("✓ [T001]")
    assert lines[1] == ""
    assert lines[2].startswith("► [T004]")


# ---------------------------------------------------------------- progress


def test_progress_is_silent_when_not_a_terminal(console: Console) -> None:
    reporter = ConsoleReporter(console)
    reporter.start_progress(2)
    reporter.advance(passed_case())
    reporter.progress(1, 2, {"passed": 1})
    reporter.stop_progress()
    assert text_of(console) == ""


def test_progress_on_a_terminal_counts_cases() -> None:
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    reporter = ConsoleReporter(console)
    reporter.start_progress(3)
    reporter.advance(passed_case())
    reporter.advance(failed_case())
    reporter.stop_progress()
    text = text_of(console)
    assert "2/3" in text
    assert "1 passed" in text and "1 failed" in text


# ---------------------------------------------------------------- summary


def test_summary_counts_and_exit_code() -> None:
    summary = Summary()
    assert summary.exit_code == 0
    for result in (passed_case(), skipped_awaiting_case()):
        summary.add(result)
    assert (summary.total, summary.passed, summary.skipped) == (2, 1, 1)
    assert summary.exit_code == 0
    summary.add(failed_case())
    assert summary.failed == 1 and summary.exit_code == 1


@pytest.mark.parametrize("status", [Status.ERROR, Status.TIMEOUT])
def test_exit_code_for_errors_and_timeouts(status: Status) -> None:
    summary = Summary()
    summary.add(CaseResult(id="x", status=status))
    assert summary.exit_code == 1


def test_summary_block(console: Console) -> None:
    summary = Summary()
    usage = Usage(prompt_tokens=70, completion_tokens=30, total_tokens=100)
    with_usage = passed_case().model_copy(update={"usage": usage})
    for result in (with_usage, skipped_awaiting_case(), dynamic_case()):
        summary.add(result)
    summary.add(CaseResult(id="E", status=Status.ERROR))
    ConsoleReporter(console).summary(summary, ["JSONL: out/results.jsonl"])
    lines = lines_of(text_of(console))
    assert "  Total:    4 tests" in lines
    assert "  Passed:   1" in lines
    assert "  Failed:   1" in lines
    assert "  Skipped:  1" in lines
    assert "  Errors:   1" in lines
    assert "  Timeouts: 0" in lines
    assert "  Total turns: 6" in lines
    assert "  Avg turns/test: 1.5" in lines
    assert "  Total time: 14.0s" in lines
    assert "  Tokens: 100 (prompt 70, completion 30)" in lines
    assert "  JSONL: out/results.jsonl" in lines
    assert not any("Stability" in line for line in lines)  # every case ran once


def test_the_summary_says_how_many_errors_a_role_made(console: Console) -> None:
    summary = Summary()
    summary.add(CaseResult(id="ok", status=Status.PASSED))
    summary.add(CaseResult(id="sim", status=Status.ERROR, error="simulator error: no JSON", error_role="simulator"))
    summary.add(CaseResult(id="own", status=Status.ERROR, error="the agent failed"))
    ConsoleReporter(console).summary(summary, [])
    assert "  Errors:   2 (1 of a role, not the agent's: left out of its pass rates)" in lines_of(text_of(console))


def test_stability_for_repeated_runs(console: Console) -> None:
    summary = Summary()
    for index in range(5):
        status = Status.FAILED if index == 2 else Status.PASSED
        summary.add(CaseResult(id="R1", status=status, run_index=index, total_turns=2))
    for index in range(3):
        summary.add(CaseResult(id="R2", status=Status.PASSED, run_index=index))
    for index in range(4):
        summary.add(CaseResult(id="R3", status=Status.PASSED if index == 0 else Status.FAILED, run_index=index))
    for index in range(2):
        summary.add(CaseResult(id="R4", status=Status.FAILED, run_index=index))
    summary.add(CaseResult(id="R5", status=Status.SKIPPED))

    stats = summary.stability()
    assert set(stats) == {("", "R1"), ("", "R2"), ("", "R3"), ("", "R4")}  # skipped runs are not counted
    r1 = stats["", "R1"]
    assert (r1.runs, r1.passes, r1.pass_rate) == (5, 4, 0.8)
    assert r1.stability_class == "mostly_stable"
    assert r1.pass_at_k == 1.0
    assert stats["", "R2"].stability_class == "stable"
    assert stats["", "R3"].stability_class == "highly_unstable" and stats["", "R3"].pass_at_k == 1.0
    assert stats["", "R4"].pass_at_k == 0.0

    ConsoleReporter(console).summary(summary)
    text = text_of(console)
    assert "Stability" in text
    row = next(line for line in lines_of(text) if "R1" in line)
    assert "80%" in row and "mostly_stable" in row
    assert "pass@k (k = runs; passed in at least one of its k tries): 3/4 cases" in text


def test_stability_class_thresholds() -> None:
    summary = Summary()
    for case_id, passes, runs in (("a", 1, 2), ("b", 4, 10), ("c", 8, 10), ("d", 10, 10), ("e", 0, 3)):
        for index in range(runs):
            summary.add(CaseResult(id=case_id, status=Status.PASSED if index < passes else Status.FAILED))
    classes = {case_id: stat.stability_class for (_, case_id), stat in summary.stability().items()}
    assert classes == {"a": "unstable", "b": "highly_unstable", "c": "mostly_stable", "d": "stable", "e": "consistently_failing"}


def test_quiet_stability_lists_every_case_that_was_not_stable_as_the_guide_says(console: Console) -> None:
    summary = Summary()
    for case_id, passes in (("steady", 3), ("flaky", 2), ("broken", 0)):
        for index in range(3):
            summary.add(CaseResult(id=case_id, status=Status.PASSED if index < passes else Status.FAILED, run_index=index))
    ConsoleReporter(console, quiet=True).summary(summary)
    rows = [line for line in lines_of(text_of(console)) if line.startswith("│")]
    assert any("flaky" in row for row in rows) and any("broken" in row and "consistently_failing" in row for row in rows)
    assert not any("steady" in row for row in rows)
    guide = " ".join((Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text(encoding="utf-8").split())
    assert "the stability table of the cases that were not stable (consistently failing ones too)" in guide


def test_stability_table_is_capped(console: Console) -> None:
    summary = Summary()
    for number in range(5):
        for _ in range(2):
            summary.add(CaseResult(id=f"C{number}", status=Status.PASSED))
    ConsoleReporter(console, stability_rows=2).summary(summary)
    text = text_of(console)
    assert "… and 3 more cases" in text
    assert "C0" in text and "C4" not in text


def test_summary_keeps_no_results() -> None:
    summary = Summary()
    for index in range(1000):
        summary.add(passed_case().model_copy(update={"run_index": index}))
    assert len(summary.tallies) == 1
    assert summary.tallies[(passed_case().agent or "", passed_case().suite, "T001")].runs == 1000
    assert not any(isinstance(value, (list, CaseResult)) for value in vars(summary).values())


def test_status_words_are_coloured_on_a_colour_terminal() -> None:
    console = Console(file=io.StringIO(), width=120, force_terminal=True, color_system="standard")
    reporter = ConsoleReporter(console, verbose=True)
    reporter.case(failed_case())
    reporter.case(skipped_awaiting_case())
    text = text_of(console)
    assert "\x1b[31mFAILED\x1b[0m" in text  # red
    assert "\x1b[32mPASSED\x1b[0m" in text  # green
    assert "\x1b[33mSKIPPED\x1b[0m" in text  # yellow


CAUSE = "[Connect call failed ('127.0.0.1', 18799)]), after 1 request."
LONG_ERROR = (
    "agent error: Cannot get a reply from agent 'a' at POST http://127.0.0.1:18799/v1/chat/completions: the endpoint"
    " (an agent whose name and route are long: " + "x" * 120 + ")"
    " could not be reached (Cannot connect to host 127.0.0.1:18799 ssl:default " + CAUSE
)


@pytest.mark.parametrize("verbose", [False, True])
def test_an_agent_error_shows_its_cause_and_whole_with_verbose(verbose: bool):
    console = Console(file=io.StringIO(), width=1000, force_terminal=False, color_system=None)
    turn = TurnResult(turn=1, input="hi", error=LONG_ERROR)
    result = case_result("E", Status.ERROR, turns=[turn], error=f"turn 1: {LONG_ERROR}")
    ConsoleReporter(console, verbose=verbose).case(result)
    lines = text_of(console).splitlines()
    error_line = next(line for line in lines if "Error: " in line)
    result_line = next(line for line in lines if "Result: " in line)
    for line in (error_line, result_line):
        assert line.rstrip().endswith(CAUSE), line
        assert "http://127.0.0.1:18799/v1/chat/completions" in line  # what was attempted
        assert ("x" * 120 in line) is verbose  # the middle
        assert (" … " in line) is not verbose


def test_under_adaptive_repeats_the_progress_line_counts_cases_decided_and_says_the_tries() -> None:
    """The tries of a case are not known ahead: the bar is of the cases to decide, each counted once
    its last try ends (the rule stopped it, or it was skipped), and the tries made are said beside it."""
    console = Console(file=io.StringIO(), width=160, force_terminal=True, color_system=None)
    reporter = ConsoleReporter(console)
    reporter.start_progress(3, adaptive=True)
    progress = reporter._progress
    reporter.advance(case_result("A", Status.PASSED, run_index=0))
    reporter.advance(case_result("B", Status.FAILED, run_index=0))
    reporter.advance(case_result("B", Status.FAILED, run_index=1, stopped="decided_below", tries=2, verdict="below"))
    reporter.advance(case_result("C", Status.SKIPPED, run_index=0))
    reporter.advance(case_result("C", Status.SKIPPED, run_index=1))  # a skipped case counts once
    assert (progress.done, progress.tries) == (2, 5)
    task = progress._progress.tasks[0]
    assert (task.completed, task.total, task.fields["unit"]) == (2, 3, "cases decided, 5 tries")
    reporter.advance(case_result("A", Status.PASSED, run_index=1, stopped="decided_above", tries=8, verdict="above"))
    assert (task.completed, task.total) == (3, 3)
    reporter.stop_progress()


def test_a_retry_shows_on_the_progress_line_until_the_next_case_ends():
    from farm._run.view import RunView
    from farm.agents.retry import _retrying

    console = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    view = RunView(console)
    view.start("target", "suite.jsonl", 2, {}, 2)
    try:
        _retrying("judge", 3, 5, None, "the endpoint could not be reached (Connect call failed: connection refused)", False)
        progress = view.reporter._progress
        assert progress._progress is not None
        phase = progress._progress.tasks[0].fields["phase"]
        assert phase == "judge: retry 3/5 after connection refused"
        view.result(case_result("T1", Status.PASSED))
        assert progress._progress.tasks[0].fields["phase"] == "Running"
    finally:
        view.stop()
    _retrying("judge", 4, 5, None, "connection refused", False)  # no listener left: nothing happens


def test_a_case_stopped_at_its_first_turn_is_not_headed_as_a_one_turn_case(console: Console) -> None:
    """A three-turn case whose agent errored at turn 1: the heading says where it stopped."""
    stopped = case_result(
        "S3",
        Status.ERROR,
        error="turn 1: agent error: HTTP 500",
        ended_by="agent",
        turns=[TurnResult(turn=1, input="Hello", error="agent error: HTTP 500", duration_ms=5)],
    )
    reporter = ConsoleReporter(console)
    reporter.case(stopped)
    reporter.case(dynamic_case())  # ended by its verdict on checkpoints after its last turn: its count
    reporter.case(case_result("ONE", Status.FAILED, mode="single", error="turn 1: no", turns=failed_case().turns))
    heads = [line for line in lines_of(text_of(console)) if line.startswith("►")]
    assert heads == [
        "► [S3] (stopped at turn 1)",
        "► [T003] Dynamic Expense Flow (2 turns)",
        "► [ONE] (1 turn)",
    ]


@pytest.mark.parametrize("verbose", [False, True])
def test_line_breaks_in_a_generated_id_or_name_cannot_forge_a_line(console: Console, verbose: bool) -> None:
    forged = "x\n✓ [forged] (1 turn, 1ms)\r\x1b[2K"
    reporter = ConsoleReporter(console, verbose=verbose)
    reporter.case(case_result(forged, Status.PASSED, name="a\nb", turns=passed_case().turns, agent=forged))
    reporter.case(case_result(forged, Status.FAILED, error="turn 1: no", turns=failed_case().turns))
    reporter.flush()
    summary = Summary()
    for index, status in enumerate((Status.PASSED, Status.FAILED)):
        summary.add(case_result(forged, status, run_index=index))
    reporter.summary(summary)
    text = text_of(console)
    assert "forged" in text
    assert not any(line.startswith("✓ [forged]") for line in text.splitlines())
    assert "[x␊✓ [forged] (1 turn, 1ms)␍␛[2K]" in text
    assert "a␊b" in text


@pytest.mark.parametrize("note", [None, "stopped\tafter 8 tool steps"])
def test_passed_lines_print_the_same_bytes_as_their_styled_text(note: str | None) -> None:
    """Without colours the held-back lines go out as one plain segment; they read exactly as Rich
    prints the styled lines (a tab, which Rich expands, included)."""
    turns = [turn.model_copy(update={"note": note}) for turn in passed_case().turns]
    results = [case_result(case_id, Status.PASSED, name="a\tb\x1b[2K", turns=turns, run_index=1) for case_id in ("A1", "x\ry")]
    fast, styled = plain_console(), plain_console()
    reporter = ConsoleReporter(fast)
    for result in results:
        reporter.case(result)
    reporter.flush()
    SafeConsole(styled).print(Text("\n").join([passed_line(r) for r in results]), soft_wrap=True)
    assert text_of(fast) == text_of(styled)
    assert "[x␍y]" in text_of(fast)


def test_quiet_failure_lines_keep_a_generated_id_on_one_line() -> None:
    console = plain_console()
    ConsoleReporter(console, quiet=True).case(case_result("a\nb", Status.ERROR, error="turn 1: boom"))
    assert lines_of(text_of(console)) == ["✗ [a␊b] ERROR: turn 1: boom"]


def test_a_cost_below_a_cent_keeps_its_significant_digits(console: Console) -> None:
    summary = Summary()
    summary.add(passed_case().model_copy(update={"cost_usd": 0.000085, "role_cost_usd": 0.0000123}))
    ConsoleReporter(console).summary(summary)
    assert "  Cost: $0.000085 agent under test, $0.000012 simulator, judge and generator" in lines_of(text_of(console))


def test_the_stability_table_names_each_cases_suite_when_the_run_has_several(console: Console) -> None:
    summary = Summary()
    for source, status in (("suites/a.jsonl:1", Status.PASSED), ("suites/b.jsonl:1", Status.FAILED)):
        for index in range(2):
            summary.add(CaseResult(id="greet", status=status, run_index=index, source=source))
    ConsoleReporter(console).summary(summary)
    text = text_of(console)
    rows = [line for line in lines_of(text) if line.startswith("│") and "greet" in line]
    assert len(rows) == 2 and "suites/b.jsonl" in rows[0] and "0%" in rows[0] and "suites/a.jsonl" in rows[1] and "100%" in rows[1]
    assert "Suite" in text and "pass@k (k = runs; passed in at least one of its k tries): 1/2 cases" in text


def test_the_stability_table_of_one_suite_has_no_suite_column(console: Console) -> None:
    summary = Summary()
    for index in range(2):
        summary.add(CaseResult(id="greet", status=Status.PASSED, run_index=index, source="suites/a.jsonl:1"))
    ConsoleReporter(console).summary(summary)
    assert "suites/a.jsonl" not in text_of(console) and "Suite" not in text_of(console)


def test_an_errored_dynamic_case_shows_its_cause_before_its_checkpoints(console: Console) -> None:
    errored = dynamic_case().model_copy(update={"status": Status.ERROR, "error": "simulator error: the simulator's answer holds no JSON", "error_role": "simulator"})
    ConsoleReporter(console).case(errored)
    lines = lines_of(text_of(console))
    result = next(i for i, line in enumerate(lines) if "Result: ERROR" in line)
    checkpoints = lines.index("  └─ Checkpoints: 1/2 required reached")
    assert result < checkpoints
    assert "simulator error: the simulator's answer holds no JSON" in lines[result]
    assert sum("Result:" in line for line in lines) == 1
