"""Checkpoint bookkeeping: the ``after`` order, same-turn dependencies, optional checkpoints, errors."""

from __future__ import annotations

from farm.cases import Checkpoint
from farm.conversation.checkpoints import CheckpointTracker
from farm.results import AssertionResult


def cp(id: str, after: list[str] | None = None, required: bool = True) -> Checkpoint:
    return Checkpoint.model_validate({"id": id, "assertion": {"type": "contains", "value": id}, "after": after or [], "required": required})


def passed(note: str = "") -> AssertionResult:
    return AssertionResult(type="contains", passed=True, message=note or None)


def failed(message: str = "not there") -> AssertionResult:
    return AssertionResult(type="contains", passed=False, message=message)


def errored(message: str = "validator error: down") -> AssertionResult:
    return AssertionResult(type="agent", passed=False, message=message, error=True)


def reached(tracker: CheckpointTracker) -> dict[str, int | None]:
    return {r.id: r.reached_at_turn for r in tracker.results}


def test_an_after_chain_is_reached_turn_by_turn():
    tracker = CheckpointTracker([cp("ask"), cp("confirm", after=["ask"]), cp("done", after=["confirm"])])
    assert tracker.apply(1, {"ask": failed(), "confirm": passed(), "done": passed()}) == []
    assert tracker.apply(2, {"ask": passed(), "confirm": failed(), "done": passed()}) == ["ask"]
    assert [c.id for c in tracker.pending] == ["confirm", "done"]
    assert tracker.missing == ["confirm", "done"] and not tracker.complete
    assert tracker.apply(3, {"confirm": passed(), "done": passed()}) == ["confirm", "done"]
    assert reached(tracker) == {"ask": 2, "confirm": 3, "done": 3}
    assert tracker.complete and tracker.missing == [] and tracker.pending == []


def test_a_dependency_reached_earlier_in_the_same_turn_counts_whatever_the_order():
    tracker = CheckpointTracker([cp("done", after=["ask"]), cp("ask")])  # the dependent listed first
    assert sorted(tracker.apply(1, {"done": passed(), "ask": passed()})) == ["ask", "done"]
    assert reached(tracker) == {"done": 1, "ask": 1}
    assert [r.id for r in tracker.results] == ["done", "ask"]  # the case's order


def test_a_passing_checkpoint_waits_for_its_dependency_and_keeps_its_latest_outcome():
    tracker = CheckpointTracker([cp("ask"), cp("done", after=["ask"])])
    tracker.apply(1, {"ask": failed("no question"), "done": passed("first")})
    record = {r.id: r for r in tracker.results}
    assert not record["done"].reached and record["done"].assertion == passed("first")
    assert record["ask"].assertion == failed("no question")
    tracker.apply(2, {"ask": passed("asked"), "done": failed("gone")})
    assert reached(tracker) == {"ask": 2, "done": None}
    assert record["done"].assertion == failed("gone")


def test_a_reached_checkpoint_keeps_the_outcome_that_reached_it():
    tracker = CheckpointTracker([cp("ask"), cp("done")])
    tracker.apply(1, {"ask": passed("asked")})
    tracker.apply(2, {"ask": failed(), "done": failed()})  # ask is no longer pending: ignored
    record = {r.id: r for r in tracker.results}
    assert record["ask"].reached_at_turn == 1 and record["ask"].assertion == passed("asked")


def test_optional_checkpoints_never_block_but_are_tracked():
    tracker = CheckpointTracker([cp("ask"), cp("upsell", required=False)])
    assert tracker.missing == ["ask"]
    tracker.apply(1, {"ask": passed(), "upsell": failed()})
    assert tracker.complete and tracker.missing == []
    assert [c.id for c in tracker.pending] == ["upsell"]
    assert {r.id: (r.required, r.reached) for r in tracker.results} == {"ask": (True, True), "upsell": (False, False)}


def test_a_checkpoint_after_an_optional_one_needs_it_reached():
    tracker = CheckpointTracker([cp("upsell", required=False), cp("done", after=["upsell"])])
    tracker.apply(1, {"upsell": failed(), "done": passed()})
    assert tracker.missing == ["done"]
    tracker.apply(2, {"upsell": passed(), "done": passed()})
    assert reached(tracker) == {"upsell": 2, "done": 2}


def test_an_error_outcome_is_recorded_and_ends_the_turn_there():
    tracker = CheckpointTracker([cp("ask"), cp("judge"), cp("done"), cp("first", after=["done"])])
    # the caller stops evaluating at the error: 'done' and 'first' have no outcome this turn
    assert tracker.apply(1, {"ask": passed(), "judge": errored()}) == ["ask"]
    record = {r.id: r for r in tracker.results}
    assert record["judge"].assertion == errored() and not record["judge"].reached
    assert record["done"].assertion is None and [c.id for c in tracker.pending] == ["judge", "done", "first"]


def test_an_error_stops_a_later_pass_from_reaching_an_earlier_dependent():
    # 'late' passes before its dependency 'ask' is reached; the error ends the turn before a second pass
    tracker = CheckpointTracker([cp("late", after=["ask"]), cp("ask"), cp("judge")])
    assert tracker.apply(1, {"late": passed(), "ask": passed(), "judge": errored()}) == ["ask"]
    assert reached(tracker) == {"late": None, "ask": 1, "judge": None}


def test_missing_outcomes_leave_checkpoints_pending():
    tracker = CheckpointTracker([cp("ask"), cp("done")])
    assert tracker.apply(1, {"done": passed(), "unknown": passed()}) == ["done"]
    assert [c.id for c in tracker.pending] == ["ask"] and tracker.missing == ["ask"]


def test_no_checkpoints_is_complete_at_once():
    tracker = CheckpointTracker([])
    assert tracker.complete and tracker.results == [] and tracker.apply(1, {}) == []
