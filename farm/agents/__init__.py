"""Agents the farm talks to: the one under test and those that play roles."""

from farm.agents.base import (
    AgentClient,
    AgentConnectionError,
    AgentError,
    AgentHTTPError,
    AgentResponseError,
    Message,
    Reply,
    ToolCall,
)

__all__ = [
    "AgentClient",
    "AgentConnectionError",
    "AgentError",
    "AgentHTTPError",
    "AgentResponseError",
    "Message",
    "Reply",
    "ToolCall",
]
