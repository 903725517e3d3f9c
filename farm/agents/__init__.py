"""Agents the farm talks to: the one under test and those that play roles."""

from farm.agents.base import (
    AgentClient,
    AgentConnectionError,
    AgentError,
    AgentHTTPError,
    AgentReplyTooLargeError,
    AgentResponseError,
    Message,
    Reply,
    ToolCall,
)
from farm.agents.factory import build_agent

__all__ = [
    "AgentClient",
    "AgentConnectionError",
    "AgentError",
    "AgentHTTPError",
    "AgentReplyTooLargeError",
    "AgentResponseError",
    "Message",
    "Reply",
    "ToolCall",
    "build_agent",
]
