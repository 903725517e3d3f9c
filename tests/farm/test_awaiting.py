"""Awaiting-input detection (docs/reference/cases.md)."""

import pytest

from farm.agents.base import Reply, ToolCall
from farm.conversation.awaiting import detect_awaiting, last_sentence

TOOLS = ("request_confirmation", "ask_user", "get_user_input")


@pytest.mark.parametrize(
    "content, awaiting",
    [
        ("What type of expense would you like to submit?", True),
        ("This requires manager approval. Please provide PO number.", True),
        ("Expense submitted. Reference: EXP-2025-001", False),
        ("How can I help", True),
        ("Shall I proceed? I will wait.", True),  # confirm/verify/proceed/continue ... ?
        ("Could you send the receipt", True),
        ("Whoever approves it will be notified.", False),  # 'who' only as a whole word
        ("Done. Anything else? ", True),
        ("I have filed it (ref 12).", False),
        ("", False),
    ],
)
def test_content_heuristics(content, awaiting):
    got, reason = detect_awaiting(Reply(content=content), TOOLS)
    assert got is awaiting
    assert reason == ("content_is_question" if awaiting else "completed")


def test_explicit_declaration_wins():
    assert detect_awaiting(Reply(content="Done.", awaiting_input=True), TOOLS) == (True, "agent_declared")
    assert detect_awaiting(Reply(content="What now?", awaiting_input=False), TOOLS) == (False, "completed")


def test_input_tools_mean_awaiting_and_other_tools_mean_go_on():
    ask = Reply(tool_calls=[ToolCall(name="ask_user", arguments={})])
    assert detect_awaiting(ask, TOOLS) == (True, "tool_requires_confirmation")
    work = Reply(content="Which one?", tool_calls=[ToolCall(name="lookup", arguments={})])
    assert detect_awaiting(work, TOOLS) == (False, "tool_calls")
    assert detect_awaiting(ask, ("custom",)) == (False, "tool_calls")


def test_last_sentence():
    assert last_sentence("This requires approval. Please provide PO number.") == "Please provide PO number."
    assert last_sentence("One line") == "One line"
