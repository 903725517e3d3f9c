"""The role records that cross process boundaries: a role call's outcome and a validator's verdict."""

from __future__ import annotations

import asyncio
import pickle

import pytest

from farm.errors import UnreadVerdict
from farm.roles.types import CallTally, RoleError, RoleOutcome, RoleRequest, SimulatorTurn, Verdict


async def _answer() -> SimulatorTurn:
    return SimulatorTurn(input="next", reasoning="closer to the goal")


async def _fail() -> SimulatorTurn:
    raise RoleError("the simulator answered no JSON: 'hmm'")


async def _crash() -> SimulatorTurn:
    raise ValueError("a bug, not a role's failure")


def test_an_answer_survives_pickling_and_unwraps():
    outcome = pickle.loads(pickle.dumps(asyncio.run(RoleOutcome.of(_answer()))))
    assert outcome.error is None
    assert outcome.unwrap() == SimulatorTurn(input="next", goal_achieved=False, reasoning="closer to the goal")


def test_a_role_error_travels_as_its_message_and_is_raised_again_unchanged():
    outcome = pickle.loads(pickle.dumps(asyncio.run(RoleOutcome.of(_fail()))))
    assert outcome.answer is None and outcome.error == "the simulator answered no JSON: 'hmm'"
    with pytest.raises(RoleError) as caught:
        outcome.unwrap()
    assert str(caught.value) == "the simulator answered no JSON: 'hmm'"


def test_other_exceptions_are_not_taken_for_a_role_error():
    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(RoleOutcome.of(_crash()))


def test_the_calls_an_outcome_counts_and_a_role_request_survive_pickling():
    outcome = RoleOutcome(answer=Verdict(passed=True), calls=CallTally(role_calls=2, cache_hits=1))
    assert pickle.loads(pickle.dumps(outcome)).calls == CallTally(role_calls=2, cache_hits=1)
    assert RoleOutcome(answer=None).calls == CallTally()
    request = RoleRequest("sim", [{"role": "user", "content": "hi"}], {"goal": "g"}, connector="other", turn=2)
    assert pickle.loads(pickle.dumps(request)) == request


def test_a_verdict_survives_pickling():
    verdict = Verdict(passed=False, score=0.25, reason="rude", suggestions=["say please"])
    assert pickle.loads(pickle.dumps(RoleOutcome(answer=verdict))).unwrap() == verdict


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        ({"passed": "Yes", "score": 1, "reason": "polite", "suggestions": ["shorter", 2]}, Verdict(True, 1.0, "polite", ["shorter", "2"])),
        ({"passed": " No ", "score": True}, Verdict(False)),
        ({"pass": False, "message": "too long"}, Verdict(False, reason="too long")),
        ({"score": 1}, None),
        ([True], None),
    ],
)
def test_a_verdict_is_read_from_the_farms_json_or_yaos(data, verdict):
    assert Verdict.from_json(data) == verdict


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"passed": "maybe"}, """its 'passed' is "maybe", not true or false"""),
        ({"passed": None}, "its 'passed' is null, not true or false"),
        ({"pass": 1}, "its 'pass' is 1, not true or false"),
        ({"passed": "nope"}, """its 'passed' is "nope", not true or false"""),
    ],
)
def test_a_passed_that_says_neither_true_nor_false_is_no_verdict(data, said):
    with pytest.raises(UnreadVerdict) as caught:
        Verdict.from_json(data)
    assert str(caught.value) == said
