"""JSONPath expressions (jsonpath-ng's extended syntax), parsed in one place so that a broken one
is said in the farm's words wherever it is written: an http agent's ``content_path`` in
``farm.toml``, a ``json_path`` or ``type`` assertion in a suite.

jsonpath-ng's own errors (``Parse error at 1:3 near token [ ([)``) count columns from 0 and
name its lexer's tokens; :func:`path_problem` says where the expression breaks counting
characters from 1, as a person reads it.
"""

from __future__ import annotations

import re
from typing import Any

from farm.wording import shown

__all__ = ["parse_path", "path_problem"]

_AT = re.compile(r"(?:at |line )(\d+)(?::|, col )(\d+)")
"""Where jsonpath-ng's parser (``at 1:3``) and lexer (``line 1, col 3``) say the mistake is."""


def parse_path(expression: str) -> Any:
    """The parsed ``expression`` (its ``find(document)`` gives the matches); a :class:`ValueError`
    in the farm's words (:func:`path_problem`) when it is not a JSONPath."""
    from jsonpath_ng.ext import parse

    if not expression.strip():
        raise ValueError(f"{shown(repr(expression))} is not a JSONPath: it is empty (e.g. $.content)")
    try:
        return parse(expression)
    except Exception as exc:  # jsonpath-ng's lexer and parser raise several kinds, with their own words
        raise ValueError(f"{shown(repr(expression))} is not a JSONPath ({_where(expression, str(exc))})") from None


def path_problem(expression: str) -> str | None:
    """Why ``expression`` is not a JSONPath (``'$.[[[' is not a JSONPath (at character 4)``), or None."""
    try:
        parse_path(expression)
    except ValueError as exc:
        return str(exc)
    return None


def _where(expression: str, error: str) -> str:
    """Where jsonpath-ng's ``error`` says ``expression`` breaks, counted from 1 in the whole expression."""
    if "EOF in string" in error:
        return "a quote is not closed"
    if "end of string" in error or "Unexpected EOF" in error:
        return "it ends too soon"
    found = _AT.search(error)
    if found is None:
        return "it cannot be read as one"
    line, column = int(found[1]), int(found[2])
    if line <= 1:
        return f"at character {column + 1}"  # jsonpath-ng counts the first line's columns from 0
    before = sum(len(text) + 1 for text in expression.split("\n")[: line - 1]) - 1  # a later line's: from its newline
    return f"at character {before + column + 1}"
