"""How well the simulator played the user: deterministic flags on its turns (``sim_flags``).

A simulator that breaks is an ``error``; one that plays badly only makes the agent fail. These
checks read a simulated turn against the conversation before it and the case's checkpoints, and
flag what no good simulator does. They are cheap and call nothing; :mod:`farm.conversation.blame`
reads them to say whose failure a failed case is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from farm.cases import Checkpoint
from farm.conversation.awaiting import last_sentence
from farm.jsontext import as_text
from farm.results import SIM_FLAGS, TurnResult

__all__ = ["SIM_FLAGS", "ending_flags", "input_flags", "still_asking"]

#: Fewer words than this and a repeated input ("yes", "ok, go") is an answer, not a loop.
REPEAT_MIN_WORDS = 3
#: A checkpoint's expected text this short ("travel") may well be the user's own word.
RECITE_MIN_CHARS = 12
#: The agent's opening words a simulator must not start with.
OPENING_WORDS = 6

_ROLE_LABEL = re.compile(r"^\W*(assistant|agent|ai|bot|system)\s*:", re.IGNORECASE)
_AGENT_OFFERS = re.compile(
    r"\bhow (can|may) i (help|assist) you\b|\bis there anything else i can\b|\bwhat can i do for you\b|\bi(?:'ve| have) (submitted|filed|created|booked) your\b",
    re.IGNORECASE,
)
_COURTESY = re.compile(r"\banything else\b|\bsomething else\b|\bfurther (help|assistance)\b|\bhelp (you )?with today\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TEXT_TYPES = ("contains", "equals", "icontains", "starts_with")


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _opening(text: str) -> str:
    """The first words of ``text`` (at most :data:`OPENING_WORDS`), normalised."""
    return " ".join(_norm(text).split()[:OPENING_WORDS])


def input_flags(text: Any, earlier: Sequence[TurnResult], checkpoints: Sequence[Checkpoint]) -> list[str]:
    """The flags of a simulated input ``text``, sent after the turns ``earlier``."""
    said = _text(text)
    flags = []
    if not any(c.isalnum() for c in said):
        flags.append("empty")
    elif _repeats(said, earlier):
        flags.append("repeat")
    if said and earlier and _speaks_as_assistant(said, earlier[-1].output):
        flags.append("as_assistant")
    elif said and not earlier and _ROLE_LABEL.match(said):
        flags.append("as_assistant")
    if said and _recites(said, checkpoints):
        flags.append("recites_checkpoint")
    return flags


def ending_flags(missing_required: Sequence[str]) -> list[str]:
    """The flags of the simulator's saying ``goal_achieved`` while ``missing_required`` are unmet."""
    return ["early_end"] if missing_required else []


def still_asking(turn: TurnResult) -> bool:
    """Whether the agent, after ``turn``, was still at work or waiting for the user's answer to a real
    question: a goal the simulator declares achieved then is not. A courtesy closer ("Anything
    else?") after a reply is no such question: the agent thought it was done."""
    if turn.awaiting_reason == "tool_calls" or turn.tool_calls and not turn.output:
        return True
    if not turn.awaiting_input:
        return False
    return not _COURTESY.search(last_sentence(turn.output) or turn.output)


def _repeats(said: str, earlier: Sequence[TurnResult]) -> bool:
    """``said`` is an earlier user input again, word for word (case and spacing aside), though the
    agent said something new since: answering the same question twice the same way is no loop."""
    text = _norm(said)
    if len(text.split()) < REPEAT_MIN_WORDS:
        return False
    answered = _norm(earlier[-1].output) if earlier else ""
    before = [_norm(earlier[index - 1].output) if index > 0 else "" for index, turn in enumerate(earlier) if _norm(_text(turn.input)) == text]
    return bool(before) and answered not in before


def _text(value: Any) -> str:
    return as_text(value) if value is not None else ""


def _speaks_as_assistant(said: str, agent_said: str) -> bool:
    """``said`` is written as the agent would: a role label, the agent's offers of help, its
    opening words, or its question restated to be answered."""
    if _ROLE_LABEL.match(said) or _AGENT_OFFERS.search(said):
        return True
    opening = _opening(agent_said)
    if len(opening.split()) >= 3 and _norm(said).startswith(opening):
        return True
    questions = [s for s in _SENTENCE_END.split(agent_said.strip()) if s.endswith("?") and len(s.split()) >= 3]
    return bool(questions) and _norm(questions[-1]) in _norm(said)


def _recites(said: str, checkpoints: Sequence[Checkpoint]) -> bool:
    """``said`` holds a checkpoint's expected text: the simulator read the test, not the goal."""
    text = _norm(said)
    for checkpoint in checkpoints:
        spec = checkpoint.assertion
        value = spec.value
        if spec.type not in _TEXT_TYPES or spec.negate or not isinstance(value, str):
            continue
        if (len(value) >= RECITE_MIN_CHARS or len(value.split()) >= 2) and _norm(value) in text:
            return True
    return False
