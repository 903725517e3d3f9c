"""Run folders for the ``farm view`` tests, written by the farm's own writers: two runs of one
suite (a regression, a fix, a flaky case under ``--runs 2``), a run of two agents, and a run
still going (results JSONL and Parquet parts, no consolidated tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.results import (
    AssertionResult,
    CaseResult,
    CheckpointResult,
    SpanRecord,
    Status,
    ToolCallRecord,
    TurnResult,
    Usage,
)
from farm.writers import JSONLWriter, ParquetWriter, RunInfo, write_run_json

SUITE = "/suites/support.jsonl"
FIRST, SECOND, AGENTS, GOING = "20260101-100000-aaaaaa", "20260102-100000-bbbbbb", "20260103-100000-cccccc", "20260104-100000-dddddd"
T0 = 1_767_261_600.0  # 2026-01-01 10:00 UTC


def contains(expected: str, reply: str) -> AssertionResult:
    passed = expected in reply
    return AssertionResult(
        type="contains", expected=expected, actual=reply, passed=passed, message=None if passed else f"reply lacks {expected!r}"
    )


def refund_spans(start: float) -> list[SpanRecord]:
    """What the support bot's first turn did, as its spans: a run with a model call and two tools under it, one failing."""
    ids = {"trace_id": "ab" * 16}

    def span(span_id: str, parent: str | None, name: str, at: float, ms: float, **fields) -> SpanRecord:
        return SpanRecord(**ids, span_id=span_id * 16, parent_span_id=parent * 16 if parent else "f" * 16, name=name, start=start + at, duration_ms=ms, **fields)

    return [
        span("1", None, "agent run", 0.0, 380.0, operation="invoke_agent"),
        span("2", "1", "chat gpt-4o", 0.01, 150.0, operation="chat"),
        span("3", "1", "execute_tool lookup_order", 0.17, 60.0, operation="execute_tool", tool_name="lookup_order"),
        span("4", "1", "execute_tool charge_card", 0.24, 30.0, operation="execute_tool", tool_name="charge_card", status="error", status_message="card declined"),
    ]


def refund_case(run_id: str, status: Status, *, run_index: int = 0, agent: str = "support-bot") -> CaseResult:
    """A two-turn static case with a tool call and a judge; fails when ``status`` is failed."""
    ok = status is Status.PASSED
    second = "Your refund of $40 is on its way." if ok else "I cannot help with refunds."
    return CaseResult(
        run_id=run_id, run_index=run_index, id="refund-flow", name="Refund a broken kettle", status=status, mode="static",
        agent=agent, tags=["refunds", "smoke"], source=f"{SUITE}:1", total_turns=2, duration_ms=850.0 + run_index,
        started_at=T0, usage=Usage(prompt_tokens=40, completion_tokens=20, total_tokens=60),
        turns=[
            TurnResult(
                turn=1, input="My kettle broke, order 1234", output="Let me look that order up.", duration_ms=400.0,
                tool_calls=[ToolCallRecord(id="c1", name="lookup_order", args={"order": "1234"}, result={"item": "kettle", "price": 40})],
                assertions=[AssertionResult(type="tool_called", expected="lookup_order", passed=True, matched_by="exact")],
                awaiting_input=True, awaiting_reason="content_is_question", input_hint="confirm the refund",
                spans=refund_spans(T0),
            ),
            TurnResult(
                turn=2, input="Yes, refund it please", output=second, duration_ms=450.0,
                assertions=[contains("refund", second.lower())],
            ),
        ],
        final_assertions=[
            AssertionResult(
                type="agent", expected="offers a refund", passed=ok, score=0.9 if ok else 0.2,
                reason="The agent confirmed the refund." if ok else "The agent refused a refund it should give.",
                message=None if ok else "judge: the agent refused a refund it should give",
            ),
        ],
        error=None if ok else "final: judge: the agent refused a refund it should give",
    )  # fmt: skip


def plain_case(
    run_id: str, number: int, status: Status, *, run_index: int = 0, agent: str = "support-bot", cost: float | None = None
) -> CaseResult:
    reply = f"answer number {number}" if status is Status.PASSED else f"nothing useful {number}"
    return CaseResult(
        run_id=run_id, run_index=run_index, id=f"faq-{number:02d}", name=f"FAQ {number}", status=status, mode="single",
        agent=agent, tags=["faq"] + (["billing"] if number % 2 else []), source=f"{SUITE}:{number + 1}", total_turns=1,
        duration_ms=100.0 * number, started_at=T0 + number, cost_usd=cost,
        turns=[] if status is Status.SKIPPED else [
            TurnResult(turn=1, input=f"question {number} about the zebra policy" if number == 7 else f"question {number}",
                       output=reply, duration_ms=100.0 * number, assertions=[contains("answer", reply)])
        ],
        error=None if status is not Status.FAILED else f"turn 1: contains: reply lacks 'answer' ({number})",
    )  # fmt: skip


def dynamic_case(run_id: str) -> CaseResult:
    """A simulator-driven case with its reasoning, two checkpoints (one missed) and a golden diff."""
    return CaseResult(
        run_id=run_id, id="book-trip", name="Books a trip", status=Status.FAILED, mode="dynamic", agent="support-bot",
        tags=["dynamic"], source=f"{SUITE}:20", total_turns=2, duration_ms=2000.0, started_at=T0 + 30,
        turns=[
            TurnResult(turn=1, input="I want to go to Lisbon", input_source="simulated", output="Which dates?",
                       simulator_reasoning="Start with the destination; dates come when asked.", duration_ms=900.0,
                       awaiting_input=True, awaiting_reason="content_is_question"),
            TurnResult(turn=2, input="May 3 to May 7", input_source="simulated", output="Booked flight LX 1.",
                       simulator_reasoning="Give the dates the goal names.", duration_ms=1100.0, truncated=True, sim_flags=["as_assistant"],
                       assertions=[AssertionResult(type="golden", passed=False, message="differs from the golden conversation",
                                                   diff="--- golden\n+++ run\n-Booked flight TP 1.\n+Booked flight LX 1.")]),
        ],
        checkpoints=[
            CheckpointResult(id="asks-dates", description="asks for the dates", reached=True, reached_at_turn=1,
                             assertion=AssertionResult(type="contains", expected="dates", passed=True)),
            CheckpointResult(id="offers-hotel", description="offers a hotel", reached=False),
        ],
        error="checkpoint offers-hotel was not reached",
        blame="simulator", blame_reason="the simulator spoke as the assistant at turn 2",
    )  # fmt: skip


def write_run(root: Path, run_id: str, results: list[CaseResult], *, started: float, agent: str = "support-bot",
              runs: int = 1, finish: bool = True, cost: float | None = None) -> Path:  # fmt: skip
    folder = root / run_id
    jsonl, parquet = JSONLWriter(folder / "results.jsonl"), ParquetWriter(folder)
    for result in results:
        jsonl.write(result)
        parquet.write(result)
    jsonl.close()
    if finish:
        parquet.close()
    else:
        parquet.flush()
    cases = len({result.id for result in results})
    info = RunInfo(
        run_id=run_id, status="finished" if finish else "running", engine="local", started_at=started,
        ended_at=started + 12.5 if finish else None, input=SUITE, agent=agent, agents=sorted({r.agent or agent for r in results}),
        cases=cases * (1 if finish else 2), runs=runs,
        config={"connectors": {"bot": {"headers": {"Authorization": "Bearer sk-never-shown"}, "api_key_env": "BOT_KEY"}}},
    )  # fmt: skip
    if cost is not None:
        info.cost = {"cost_usd": cost, "role_cost_usd": 0.05}
    write_run_json(folder, info)
    return folder


@pytest.fixture(scope="session")
def results_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-results")
    first = [refund_case(FIRST, Status.PASSED), dynamic_case(FIRST)]
    first += [plain_case(FIRST, n, Status.FAILED if n == 3 else Status.SKIPPED if n == 5 else Status.PASSED) for n in range(1, 9)]
    write_run(root, FIRST, first, started=T0, cost=0.42)
    second = []
    for index in range(2):  # --runs 2: faq-04 flaky, refund-flow regresses, faq-03 fixed
        second.append(refund_case(SECOND, Status.FAILED, run_index=index))
        second.append(dynamic_case(SECOND).model_copy(update={"run_index": index}))
        for n in range(1, 9):
            status = Status.SKIPPED if n == 5 else Status.FAILED if (n == 4 and index == 1) else Status.PASSED
            second.append(plain_case(SECOND, n, status, run_index=index))
    write_run(root, SECOND, second, started=T0 + 86400, runs=2, cost=0.51)
    both = [plain_case(AGENTS, n, Status.PASSED, agent="support-bot", cost=0.03) for n in range(1, 5)]
    both += [plain_case(AGENTS, n, Status.FAILED if n > 2 else Status.PASSED, agent="helper-bot", cost=0.02) for n in range(1, 5)]
    write_run(root, AGENTS, both, started=T0 + 2 * 86400, agent="support-bot")
    going = [plain_case(GOING, n, Status.PASSED) for n in range(1, 4)]
    write_run(root, GOING, going, started=T0 + 3 * 86400, finish=False)
    (root / ".cache").mkdir()
    (root / "notes").mkdir()  # not a run: no run.json, tables or parts
    (root.parent / "secret.txt").write_text("outside the results folder")
    return root
