"""Long text shown short: the one rule for cutting a text to a limit in messages and reports."""

from __future__ import annotations

__all__ = ["clip"]


def clip(text: str, limit: int, mark: str = "…", *, within: bool = True) -> str:
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
