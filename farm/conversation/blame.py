"""Whose failure a failed dynamic case is: the agent's, the simulator's, the case's checkpoint's.

A dynamic case's verdict depends on the LLM that plays the user as much as on the agent. The
simulator's turns carry deterministic flags (:mod:`farm.conversation.simflags`); where one of them
is conclusive it decides. Otherwise the blame is ``unknown``, unless the run asks an attributor
(``--attribute``), which reads the goal, the checkpoints and the transcript.
"""

from __future__ import annotations

from farm.conversation.simflags import still_asking
from farm.results import SIM_FLAGS, Blame, CaseResult, TurnResult

__all__ = ["CONCLUSIVE", "UNKNOWN_REASON", "deterministic_blame"]

CONCLUSIVE = ("empty", "repeat", "as_assistant", "recites_checkpoint")
"""Flags that make a failed case the simulator's whatever the agent did: no agent's fault makes a
good simulator send nothing, loop, speak as the assistant or read out the test."""

UNKNOWN_REASON = "no flag on the simulator's turns settles it (--attribute asks an attributor)"


def deterministic_blame(result: CaseResult) -> tuple[Blame, str] | None:
    """The blame of a failed dynamic case that its simulator's flags settle, with its reason; None
    when they settle nothing.

    ``early_end`` settles it only when the agent was still at work or asking a real question: when
    the agent had claimed to be done, a simulator that believed it did right, and the fault is the
    agent's claim (or the checkpoint's), which only reading the conversation can tell."""
    for turn in result.turns:
        for flag in turn.sim_flags:
            if flag in CONCLUSIVE:
                return "simulator", f"the simulator {SIM_FLAGS[flag]} at turn {turn.turn}"
            if flag == "early_end" and still_asking(turn):
                return "simulator", f"the simulator {SIM_FLAGS[flag]}, after turn {turn.turn}, {_what_agent_did(turn)}"
    return None


def _what_agent_did(turn: TurnResult) -> str:
    if turn.awaiting_input:
        return "while the agent was still asking for the user's answer"
    return "while the agent was still at work (its reply ended in tool calls)"
