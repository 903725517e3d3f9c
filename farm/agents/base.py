"""The one seam every agent is reached through: ``send(messages, options) -> Reply``.

Errors::

    AgentError                 the call did not give a usable reply
    ├── AgentHTTPError         the endpoint answered with an error status
    ├── AgentConnectionError   the endpoint could not be reached
    │   └── AgentTimeoutError  no answer came within the connector's timeout, retries spent
    └── AgentResponseError     the answer could not be read as a reply
        └── AgentReplyTooLargeError  the answer is larger than the connector's max_reply_bytes
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from farm.errors import (
    AgentConnectionError,
    AgentError,
    AgentHTTPError,
    AgentReplyTooLargeError,
    AgentResponseError,
    AgentTimeoutError,
)
from farm.results import SpanRecord, Usage

__all__ = [
    "VOLATILE_OPTIONS",
    "AgentClient",
    "AgentConnectionError",
    "AgentError",
    "AgentHTTPError",
    "AgentReplyTooLargeError",
    "AgentResponseError",
    "AgentTimeoutError",
    "CacheKeyed",
    "Message",
    "Reply",
    "ToolCall",
    "parse_arguments",
    "replied",
    "stable_options",
]

Message = dict[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ...}`` (plus tool fields)."""


class ToolCall(BaseModel):
    id: str | None = None
    name: str
    arguments: Any = None
    """Parsed JSON arguments; the raw string when they are not JSON."""


class Reply(BaseModel):
    """What an agent answered to one call."""

    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    awaiting_input: bool | None = None
    """Set when the agent declares it explicitly (detection priority 1)."""
    input_hint: str | None = None
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    """What this call cost in USD at its connector's ``price`` (set by the client that sent it);
    None when the connector has none, or nothing was sent."""
    retries: int = 0
    """Requests repeated to get this reply (after a 429, a 5xx or a broken connection)."""
    raw: Any = None
    """The decoded response body, for debugging; never written to results."""
    spans: list[SpanRecord] | None = None
    """Spans that came with the reply: a replayed turn's recorded ones (``farm rescore``)."""


def replied(reply: Reply, content: Any, where: str, what: str = "null") -> Reply:
    """``reply``, unless the agent replied nothing: its content (``content``, as the agent sent it,
    found at ``where``; ``what`` it is when None, for the message) null or absent, no tool call,
    and no ``awaiting_input`` declared. Read as an empty reply, that would pass every
    ``not_contains``: it is an :class:`AgentResponseError`.
    An empty text (``""``) sent as such is the agent's answer, and stays one.

    Every kind of agent reads its answer through this (python, http, openai)."""
    if content is None and not reply.tool_calls and not reply.awaiting_input:
        raise AgentResponseError(f"it replied nothing: {where} is {what}, with no tool calls nor awaiting_input")
    return reply


@runtime_checkable
class AgentClient(Protocol):
    """An agent the farm can talk to."""

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class CacheKeyed(Protocol):
    """An agent that says which parts of a call decide its answer (:mod:`farm.roles.cache` keys
    a cached call on them); the cache falls back to the messages and stable options otherwise."""

    def cache_key_parts(self, messages: list[Message], options: dict[str, Any]) -> dict[str, Any]: ...


VOLATILE_OPTIONS = frozenset({"session_id", "run_id", "turn_count", "turn_number"})
"""Option and metadata keys that never decide an answer: they change between runs (ids) or
repeat what the messages already say (turn counters)."""


def stable_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` (and their ``metadata``) without the :data:`VOLATILE_OPTIONS`."""
    out = {k: v for k, v in options.items() if k not in VOLATILE_OPTIONS}
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k not in VOLATILE_OPTIONS}
    return out


def parse_arguments(arguments: Any) -> Any:
    """Tool-call arguments parsed from JSON; the raw string when they are not JSON; ``{}`` when absent."""
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments
