"""A golden conversation as data: the golden file's shape, and the :class:`GoldenCheck` a loaded case
carries to wherever it runs. Recording and comparing are :mod:`farm.conversation.golden`; this
module is below the loader, so that a loaded case can name what it is compared with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from farm.cases import GoldenRule
from farm.jsontext import json_value
from farm.results import CaseResult

__all__ = ["GOLDEN_FORMAT", "GoldenCheck", "GoldenConversation", "GoldenToolCall", "GoldenTurn", "suite_file"]

GOLDEN_FORMAT = 1
"""Version of the golden file's shape."""


class GoldenToolCall(BaseModel):
    """A tool call as the golden file holds it."""

    name: str
    arguments: Any = None
    """The parsed arguments (compared)."""
    result: Any = None
    """What the farm answered (recorded, not compared: it is the suite's own mock)."""


class GoldenTurn(BaseModel):
    """One exchange of a golden conversation."""

    turn: int
    input: Any = None
    reply: str = ""
    tool_calls: list[GoldenToolCall] = Field(default_factory=list)
    awaiting_input: bool = False


class GoldenConversation(BaseModel):
    """A golden file: a case's conversation when it passed."""

    format: int = GOLDEN_FORMAT
    id: str
    """The case id."""
    name: str | None = None
    suite: str | None = None
    """The suite file's name (``support.jsonl``), with ``id`` enough to find the case again."""
    mode: str | None = None
    agent: str | None = None
    """The agent the conversation was recorded with."""
    turns: list[GoldenTurn] = Field(default_factory=list)

    @classmethod
    def from_result(cls, result: CaseResult) -> GoldenConversation:
        """The conversation ``result`` recorded: each turn's input, reply, tool calls and
        ``awaiting_input``, with the values as a JSON file gives them back."""
        return cls(
            id=result.id,
            name=result.name,
            suite=suite_file(result.source),
            mode=result.mode,
            agent=result.agent,
            turns=[
                GoldenTurn(
                    turn=turn.turn,
                    input=json_value(turn.input),
                    reply=turn.output,
                    tool_calls=[GoldenToolCall(name=c.name, arguments=json_value(c.args), result=json_value(c.result)) for c in turn.tool_calls],
                    awaiting_input=turn.awaiting_input,
                )
                for turn in result.turns
            ],
        )

    def to_text(self) -> str:
        """The file's text: sorted keys, indented, characters as they are (diff-friendly)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def suite_file(source: str | None) -> str | None:
    """The suite file's name from a ``file:line`` source (``<message>`` for a direct message)."""
    if not source:
        return None
    head, _, line = source.rpartition(":")
    name = head if head and line.isdigit() else source
    return Path(name).name or name


@dataclass
class GoldenCheck:
    """What a case is compared with: travels with the case to wherever it runs."""

    rule: GoldenRule
    path: str
    """The golden file, as the messages name it."""
    conversation: GoldenConversation | None = None
    """None: the file is missing or unreadable (``problem`` says which)."""
    problem: str | None = None
    missing: bool = False
