"""The demo expense assistant: a deterministic, offline OpenAI-compatible agent.

It reads the conversation it is sent (no server-side state) and answers like a
small expense assistant would: it asks what type of expense, drafts one with
the ``create_expense`` tool, submits it with ``submit_expense`` once the user
confirms, needs a PO number above $10,000, and answers policy questions in
JSON. The bundled simulator and validator are deterministic too, so
``farm demo`` needs no network and no key; so is the bundled generator, which
writes expense cases this agent passes.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from farm.demo.server import Response, chat_completion
from farm.messages import content_text

__all__ = ["generator", "handle", "reply_to", "scripted_user", "simulator", "validator", "TOOLS"]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_expense",
            "description": "Draft an expense",
            "parameters": {"type": "object", "properties": {"amount": {"type": "number"}, "type": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "submit_expense", "description": "Submit the drafted expense", "parameters": {"type": "object"}}},
]

POLICY = {"category": "travel", "limit": 5000, "currency": "USD", "receipts_required": True}
_AMOUNT = re.compile(r"\$\s?([\d,]+(?:\.\d+)?)")
_TYPES = ("travel", "meal", "dinner", "equipment", "hotel", "taxi", "training")


def _last_call(messages: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            if call.get("id") == call_id:
                return call["function"]
    return {}


def reply_to(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant's answer to a conversation: ``{"content": ..., "tool_calls": [...]}``."""
    last = messages[-1] if messages else {"role": "user", "content": ""}
    if last.get("role") == "tool":
        fn = _last_call(messages, last.get("tool_call_id", ""))
        args = json.loads(fn.get("arguments") or "{}")
        result = json.loads(last.get("content") or "{}") if (last.get("content") or "").startswith("{") else {}
        if fn.get("name") == "create_expense":
            return {"content": f"I've drafted a {args.get('type', 'general')} expense of ${args.get('amount')}. Shall I submit it? Please confirm."}
        if fn.get("name") == "submit_expense":
            ref = result.get("expense", {}).get("id", "EXP-2025-001")
            return {"content": f"Expense submitted. Reference: {ref}"}
        return {"content": "Done."}
    text = content_text(last.get("content"), separator=" ").strip()
    lowered = text.lower()
    amount = _AMOUNT.search(text)
    if "policy" in lowered:
        return {"content": "Here is the travel policy:\n```json\n" + json.dumps(POLICY) + "\n```"}
    if amount:
        value = float(amount.group(1).replace(",", ""))
        value = int(value) if value.is_integer() else value
        if value > 10000:
            return {"content": "This requires manager approval. Please provide PO number."}
        kind = next((t for t in _TYPES if t in lowered), "general")
        return {"content": "", "tool_calls": [{"id": f"call_create_{len(messages)}", "name": "create_expense", "arguments": {"amount": value, "type": kind}}]}
    if re.match(r"^(yes|confirm|ok|sure)\b", lowered):
        return {"content": "", "tool_calls": [{"id": f"call_submit_{len(messages)}", "name": "submit_expense", "arguments": {}}]}
    if "expense" in lowered:
        return {"content": "Sure. What type of expense would you like to submit?"}
    if re.match(r"^(hi|hello|hey)\b", lowered):
        return {"content": "Hello! I'm the expense assistant. I can file expenses and explain the travel policy."}
    return {"content": "I can help you file expenses and explain the travel policy."}


def handle(path: str, body: Any, headers: dict[str, str]) -> Response:
    """The HTTP handler: ``POST /v1/chat/completions`` in the OpenAI shape."""
    if not path.rstrip("/").endswith("/chat/completions") or not isinstance(body, dict):
        return Response({"error": {"message": f"no route {path}"}}, status=404)
    answer = reply_to(body.get("messages") or [])
    return Response(chat_completion(answer.get("content"), answer.get("tool_calls"), model=body.get("model") or "demo"))


# -- the demo's role agents (kind = "python"): deterministic stand-ins for LLMs ---------


def scripted_user(
    said: str | None, replies: list[tuple[str, Any]], otherwise: str, opening: str | None = None
) -> dict[str, Any]:
    """A scripted user's next turn, ``{"input", "goal_achieved"}``, after the agent said ``said``.

    The first ``(cue, reply)`` of ``replies`` whose cue is in what the agent
    said gives the reply (``None``: the goal is achieved); no cue, ``otherwise``.
    ``said`` is None before the conversation starts: the user opens with
    ``opening`` (default ``otherwise``).
    """
    if said is None:
        return {"input": opening if opening is not None else otherwise, "goal_achieved": False}
    said = said.lower()
    reply = next((reply for cue, reply in replies if cue in said), otherwise)
    return {"input": "" if reply is None else reply, "goal_achieved": reply is None}


def simulator(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """A user who wants to file the expense named in ``metadata.goal``."""
    metadata = options.get("metadata", {})
    last = next((m for m in reversed(messages) if m.get("role") == "assistant" and m.get("content")), None)
    said = (content_text(last.get("content"), separator=" ") if last else "") if messages else None
    replies = [("type of expense", metadata.get("details", "A team dinner, $250")), ("confirm", "Yes, confirm."), ("submitted", None)]
    answer = scripted_user(said, replies, "I'd like to submit an expense.", opening="Hi, I need to file an expense.")
    answer["reasoning"] = f"goal: {metadata.get('goal', 'file an expense')}"
    return json.dumps(answer)


def validator(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """Passes when the agent's last reply mentions every word in ``metadata.must_mention``."""
    metadata = options.get("metadata", {})
    words = metadata.get("must_mention") or []
    reply = next((content_text(m.get("content"), separator=" ") for m in reversed(messages) if m.get("role") == "assistant" and m.get("content")), "")
    missing = [w for w in words if w.lower() not in reply.lower()]
    verdict = {
        "passed": not missing,
        "score": 1.0 - len(missing) / max(1, len(words)),
        "reason": "mentions everything the criteria ask for" if not missing else f"does not mention: {', '.join(missing)}",
        "suggestions": [f"mention {w}" for w in missing],
    }
    return json.dumps(verdict)


def generator(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
    """``{"cases": [...]}``: ``metadata.count`` expense cases (default 5) that the demo agent passes.

    Each request's cases differ from another request's (their amounts come from a
    checksum of what the request says: its batch, focus, what to avoid), as an LLM's would.
    """
    metadata = options.get("metadata", {})
    count = max(0, int(metadata.get("count") or 5))
    start = zlib.crc32(json.dumps(metadata, sort_keys=True, default=str).encode()) % 5000
    focus = str(metadata.get("focus") or "happy-path")
    cases = []
    for i in range(count):
        kind = _TYPES[(start + i) % len(_TYPES)]
        amount = 10 + start + i * 7
        cases.append(
            {
                "id": f"{focus}-{kind}-{amount}",
                "input": f"I need to file a {kind} expense of ${amount}",
                "assertions": [{"type": "tool_called", "name": {"name": "create_expense", "arguments": {"amount": amount}}}],
                "tags": ["generated", focus],
            }
        )
    return json.dumps({"cases": cases})
