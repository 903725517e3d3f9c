"""The records that the runner, the role players and both engines exchange.

They live apart from the conversation runner so that a module needing one of
them (the role pools, the interactive desk, input generators) does not import
the conversation engine for a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["HumanRequest", "RoleError", "SimulatorTurn"]


class RoleError(Exception):
    """A role agent (simulator, validator, ...) failed or answered nothing usable."""


@dataclass
class SimulatorTurn:
    """The simulator's answer: the next user input, or that the goal is achieved."""

    input: Any = None
    goal_achieved: bool = False
    reasoning: str | None = None


@dataclass
class HumanRequest:
    """What a person at the terminal is asked to answer."""

    case_id: str
    turn: int
    question: str
    hint: str | None
    proposed: Any = None
    """The input the turn or the simulator would send; the person may keep or replace it."""
    timeout: float = 300.0
