"""Is the agent waiting for the user? Hybrid detection (docs/reference/cases.md), first rule that applies:

1. the reply declares ``awaiting_input`` itself            -> ``agent_declared``
2. it calls a tool from the input-requesting set             -> ``tool_requires_confirmation``
3. it ends in other tool calls: neither awaiting nor done    -> ``tool_calls``
4. its start or its last sentence reads as a question        -> ``content_is_question``
5. otherwise                                                 -> ``completed``
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from farm.agents.base import Reply

__all__ = ["detect_awaiting", "last_sentence", "looks_like_question"]

_QUESTION_START = re.compile(r"^(what|how|when|where|which|who|please|could you)\b", re.IGNORECASE)
_CONFIRM = re.compile(r"\b(confirm|verify|proceed|continue)\b[^.!?]*\?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TRAILING = " \t\r\n\"'”’)*_`"
_LEADING = " \t\r\n\"'“‘(*_`#>-"


def last_sentence(text: str) -> str:
    """The last sentence of ``text`` (what an agent's question usually is)."""
    parts = [p for p in _SENTENCE_END.split(text.strip()) if p.strip()]
    return parts[-1].strip() if parts else ""


def looks_like_question(content: str) -> bool:
    text = content.strip()
    if not text:
        return False
    if text.rstrip(_TRAILING).endswith("?"):
        return True
    if _CONFIRM.search(text):
        return True
    for sentence in (text, last_sentence(text)):
        if _QUESTION_START.match(sentence.lstrip(_LEADING)):
            return True
    return False


def detect_awaiting(reply: Reply, input_tools: Iterable[str]) -> tuple[bool, str]:
    """``(awaiting, reason)`` for one reply."""
    if reply.awaiting_input is not None:
        if reply.awaiting_input:
            return True, "agent_declared"
        return False, "tool_calls" if reply.tool_calls else "completed"
    names = set(input_tools)
    if any(call.name in names for call in reply.tool_calls):
        return True, "tool_requires_confirmation"
    if reply.tool_calls:
        return False, "tool_calls"
    if looks_like_question(reply.content):
        return True, "content_is_question"
    return False, "completed"
