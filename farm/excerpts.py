"""Long text shown short: the one rule for cutting a text to a limit in messages and reports."""

from __future__ import annotations

__all__ = ["DOTS", "ELLIPSIS", "LENGTH", "MORE_CHARACTERS", "NOTHING", "clip"]

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
