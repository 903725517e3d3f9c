"""Numbers as users give them to an option: ``--parallel 4``, ``--max-cost 2.5``, ``--top 0``.

The commands take these options as text and the farm reads them here, so that ``abc``, ``-1`` or
``1.5`` where a count goes is said in one sentence of the farm's, naming the option and the value
(``--parallel -1: give a whole number of 1 or more``), as ``--runs`` and ``--alpha`` are, never in
the command-line library's words. The Python API gives numbers, which are read the same way. A leaf.
"""

from __future__ import annotations

import math

from farm.errors import UsageError

__all__ = ["as_number", "as_whole", "whole"]


def as_whole(value: object) -> int | None:
    """``value`` as a whole number (an int, or text of one such as ``-3``); None when it is not one
    (text, a fraction, a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        return int(text) if digits.isascii() and digits.isdigit() else None
    return None


def as_number(value: object) -> float | None:
    """``value`` as a finite number (an int, a float, or text of one); None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value) if isinstance(value, (int, float, str)) else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def whole(flag: str, value: object, least: int, hint: str = "") -> int:
    """``value`` as a whole number of at least ``least``; else a :class:`UsageError` naming ``flag``
    and the value as given (``hint``: what to add, after a semicolon)."""
    number = as_whole(value)
    if number is None or number < least:
        raise UsageError(f"{flag} {value}: give a whole number of {least} or more{f'; {hint}' if hint else ''}")
    return number
