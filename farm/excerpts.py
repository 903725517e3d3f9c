"""Long text shown short: the one rule for cutting a text to a limit in messages and reports."""

from __future__ import annotations

__all__ = ["DOTS", "ELLIPSIS", "LENGTH", "MORE_CHARACTERS", "NOTHING", "clip", "clip_middle"]

ELLIPSIS = "…"
"""The usual mark: one character, for a console line or an attribute."""
DOTS = "..."
"""The mark in error messages about what an agent sent or a case attaches."""
MORE_CHARACTERS = "… ({more} more characters)"
"""The HTML report's mark: how much was left out."""
LENGTH = "… ({length} chars)"
"""The mark of a recorded assertion value: how long the whole value was."""
NOTHING = ""
"""No mark: the text just stops (a short quote inside a sentence that says what it quotes)."""


def clip(text: str, limit: int, mark: str = ELLIPSIS, *, within: bool = True) -> str:
    """``text`` as it is when it has at most ``limit`` characters, else cut and ended with ``mark``.

    ``within``: the cut text, ``mark`` included, has ``limit`` characters (an
    attribute or a line with a size); otherwise the first ``limit`` characters
    are kept and ``mark`` follows them. ``mark`` may name ``{more}`` (how many
    characters were cut) and ``{length}`` (the whole text's length), as in
    ``"… ({more} more characters)"``.
    """
    if len(text) <= limit:
        return text
    mark = mark.format(more=len(text) - limit, length=len(text))
    return text[: limit - len(mark)] + mark if within else text[:limit] + mark


def clip_middle(text: str, limit: int, mark: str = " … ") -> str:
    """``text`` as it is when it has at most ``limit`` characters, else its start and its end
    with ``mark`` between them, cut at spaces where one is near, ``limit`` characters in all.

    For error messages, whose cause is at the end: ``"Cannot get a reply from agent 'a' at
    POST http://…: the endpoint could not be reached (… [Connect call failed …]), after 1 request."``
    keeps what was attempted and why it failed, and drops the middle.
    """
    if len(text) <= limit:
        return text
    room = max(0, limit - len(mark))
    head_room, tail_room = room // 2, room - room // 2
    head = text[:head_room]
    space = head.rfind(" ")
    if space > head_room * 2 // 3:
        head = head[:space]
    tail = text[len(text) - tail_room:] if tail_room else ""
    space = tail.find(" ")
    if 0 <= space < tail_room // 3:
        tail = tail[space + 1:]
    return head.rstrip() + mark + tail.lstrip()
