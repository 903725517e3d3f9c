"""farm.conversation.simflags and farm.conversation.blame: the simulator's turns flagged by rule, and
whose failure a failed dynamic case is when the flags settle it."""

from __future__ import annotations

import pytest

from farm.cases import Checkpoint
from farm.conversation.blame import UNKNOWN_REASON, deterministic_blame
from farm.conversation.simflags import input_flags, still_asking
from farm.results import CaseResult, Status, TurnResult, blame_text

CHECKPOINTS = [
    Checkpoint.model_validate({"id": "done", "assertion": {"type": "contains", "value": "Expense submitted"}}),
    Checkpoint.model_validate({"id": "short", "assertion": {"type": "contains", "value": "travel"}}),
]


def turn(number: int, said: str, answered: str, awaiting: bool = True) -> TurnResult:
    return TurnResult(turn=number, input=said, input_source="simulated", output=answered, awaiting_input=awaiting,
                      awaiting_reason="content_is_question" if awaiting else "completed")  # fmt: skip


HISTORY = [
    turn(1, "I want to submit an expense", "What type of expense would you like to submit?"),
    turn(2, "Business travel, $3500", "I've drafted a travel expense of $3500. Shall I submit it? Please confirm."),
]


@pytest.mark.parametrize(
    ("said", "flags"),
    [
        ("Yes, confirm.", []),
        ("  ...  ", ["empty"]),
        ("I want to submit an EXPENSE", ["repeat"]),
        ("Assistant: your expense is filed.", ["as_assistant"]),
        ("How can I help you today?", ["as_assistant"]),
        ("I've drafted a travel expense of $3500, yes", ["as_assistant"]),
        ("Yes. Expense submitted, right?", ["recites_checkpoint"]),
        ("A travel one", []),  # a checkpoint's one short word is the user's own word too
    ],
)
def test_a_simulated_input_is_flagged_by_rule(said: str, flags: list[str]):
    assert input_flags(said, HISTORY, CHECKPOINTS) == flags


def test_the_agents_question_restated_is_speaking_as_the_assistant():
    history = [turn(1, "hi", "Thanks. What is the amount of the expense?")]
    assert input_flags("What is the amount of the expense? It is $40.", history, []) == ["as_assistant"]


def test_the_same_answer_to_the_same_question_is_no_repeat():
    history = [
        turn(1, "I want to submit an expense", "What type of expense?"),
        turn(2, "Business travel for a client", "What type of expense?"),
    ]
    assert input_flags("Business travel for a client", history, []) == []
    assert input_flags("Yes", [turn(1, "Yes", "Confirm the amount?")], []) == []  # short answers repeat


def test_still_asking_tells_a_real_question_from_a_courtesy_closer():
    assert still_asking(turn(2, "x", "Shall I submit it? Please confirm."))
    assert not still_asking(turn(2, "x", "Your expense is submitted. Anything else I can help with?"))
    assert not still_asking(turn(2, "x", "Done.", awaiting=False))
    working = TurnResult(turn=1, output="", awaiting_reason="tool_calls")
    assert still_asking(working)


def failed(*turns: TurnResult) -> CaseResult:
    return CaseResult(id="c", status=Status.FAILED, mode="dynamic", turns=list(turns))


def test_a_conclusive_flag_blames_the_simulator_naming_the_turn():
    second = turn(2, "I want to submit an expense", "What type?")
    second.sim_flags = ["repeat"]
    assert deterministic_blame(failed(HISTORY[0], second)) == ("simulator", "the simulator repeated an earlier user turn word for word at turn 2")


def test_an_early_end_blames_the_simulator_only_while_the_agent_still_asked():
    asking = turn(2, "Business travel", "Shall I submit it? Please confirm.")
    asking.sim_flags = ["early_end"]
    blame, reason = deterministic_blame(failed(asking)) or ("", "")
    assert blame == "simulator" and "after turn 2" in reason and "still asking" in reason
    claimed = turn(2, "Business travel", "Your expense is submitted. Anything else?")
    claimed.sim_flags = ["early_end"]
    assert deterministic_blame(failed(claimed)) is None  # the agent's claim, or the checkpoint: not settled by rule


def test_no_flag_settles_nothing():
    assert deterministic_blame(failed(*HISTORY)) is None
    assert "--attribute" in UNKNOWN_REASON


def test_blame_text_is_what_every_summary_says():
    assert blame_text({"simulator": 2, "agent": 5}) == "7 failed: 5 agent, 2 simulator"
    assert blame_text({}) is None


def test_a_question_before_the_last_sentence_restated_is_speaking_as_the_assistant():
    history = [turn(1, "hi", "I drafted it. Shall I submit it now? Please confirm.")]
    assert input_flags("Shall I submit it now? Yes.", history, []) == ["as_assistant"]


def test_a_repeat_already_flagged_is_not_flagged_again_for_the_same_question():
    history = [
        turn(1, "I want to submit an expense", "What type of expense?"),
        turn(2, "I want to submit an expense", "What type of expense?"),
    ]
    assert input_flags("I want to submit an expense", history, []) == []
