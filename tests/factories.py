"""Result records built by hand, for the tests of what reads them: the console, the writers and the reports."""

from __future__ import annotations

from typing import Any

from farm.results import CaseResult, Status, ToolCallRecord, TurnResult, Usage


def usage(calls: int = 1) -> Usage:
    """The tokens of ``calls`` small model calls (10 in, 5 out each)."""
    return Usage(prompt_tokens=10 * calls, completion_tokens=5 * calls, total_tokens=15 * calls)


def lookup_call(call_id: str = "call-1") -> ToolCallRecord:
    """A mocked ``lookup_order`` call for order 42 and its result."""
    return ToolCallRecord(id=call_id, name="lookup_order", args={"order": 42}, result={"status": "shipped"}, mocked=True)


def case_result(case_id: str, status: Status, turns: list[TurnResult] | None = None, **fields: Any) -> CaseResult:
    """A static case run of ``turns`` (unless ``fields`` say otherwise): its turn count and usage are theirs."""
    turns = turns or []
    fields.setdefault("mode", "static")
    fields.setdefault("total_turns", len(turns))
    fields.setdefault("usage", sum((turn.usage for turn in turns), Usage()))
    return CaseResult(id=case_id, status=status, turns=turns, **fields)
