"""How a one-line message names what a user wrote: escaped so that it stays one line
(:func:`shown`), with the nearest known name for a typo (:func:`nearest`), and a count with its
noun (:func:`plural`). A leaf, so that
the config, the suite checks and generation can all word their mistakes the same way."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["nearest", "nearest_name", "plural", "shown"]


def nearest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or nothing."""
    close = nearest_name(name, known)
    return f" (did you mean '{close}'?)" if close else ""


def nearest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, if one is close enough to suggest."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def plural(count: int, noun: str) -> str:
    """``1 case``, ``2 cases``, ``3 batches``: a count with its noun."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith(('ch', 'x')) else 's'}"


def shown(text: str) -> str:
    """``text`` with what would break a line or drive a terminal escaped as Python writes it
    (``\\n``, ``\\x1b``, ``\\u2028``): names and values from a suite, echoed in one-line messages."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
