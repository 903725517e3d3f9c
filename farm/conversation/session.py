"""The state of one conversation (the seed's "Context and State")."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass, field
from typing import Any

from farm.agents.base import Message, Reply
from farm.jsontext import as_text
from farm.results import ToolCallRecord

__all__ = ["Session", "deep_merge"]

OK_RESULT = {"status": "ok"}


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """``update`` merged into a copy of ``base``; nested objects merge, other values replace."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass
class Session:
    """Messages, tool results and variables of one conversation, from its first turn to its last."""

    id: str = field(default_factory=lambda: f"farm-{os.urandom(6).hex()}")
    """12 random hex digits: those a ``uuid4().hex[:12]`` would give, without building the UUID."""
    messages: list[Message] = field(default_factory=list)
    tool_results: list[ToolCallRecord] = field(default_factory=list)
    variables: dict[str, Any] = field(default_factory=dict)
    turn_count: int = 0

    def add_user(self, messages: list[Message]) -> None:
        self.messages.extend(messages)

    def add_reply(self, reply: Reply, results: list[Any] | None = None) -> list[ToolCallRecord]:
        """Append the assistant message and, for each tool call, one tool message.

        ``results`` gives each call's result (``None``: ``{"status": "ok"}``), so the
        history stays valid for any OpenAI-compatible endpoint.
        """
        message: Message = {"role": "assistant", "content": reply.content or None}
        records: list[ToolCallRecord] = []
        if reply.tool_calls:
            message["tool_calls"] = []
            for i, call in enumerate(reply.tool_calls):
                call_id = call.id or f"call_{self.turn_count}_{len(self.tool_results) + i}"
                arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
                message["tool_calls"].append(
                    {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": arguments}}
                )
        if message["content"] is None and not reply.tool_calls:
            message["content"] = ""
        self.messages.append(message)
        for i, call in enumerate(reply.tool_calls):
            result = results[i] if results and i < len(results) else None
            record = ToolCallRecord(
                id=message["tool_calls"][i]["id"],
                name=call.name,
                args=call.arguments,
                result=OK_RESULT if result is None else result,
                mocked=result is not None,
            )
            self.messages.append(
                {"role": "tool", "tool_call_id": record.id, "content": as_text(record.result)}
            )
            self.tool_results.append(record)
            records.append(record)
        return records

    def state_document(self) -> dict[str, Any]:
        """Every tool result (in call order) merged, then ``variables`` on top.

        ``final_assertions`` with ``json_path`` read this, so ``$.expense.status``
        finds the status that ``create_expense`` returned.
        """
        doc: dict[str, Any] = {}
        for record in self.tool_results:
            if isinstance(record.result, dict) and record.mocked:
                doc = deep_merge(doc, record.result)
        return deep_merge(doc, self.variables)
