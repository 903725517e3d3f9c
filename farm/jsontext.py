"""JSON in text: a value written as text, and the JSON found in what an LLM wrote.

:func:`as_text` is how a value that is not a string (a tool result, an
expected value) is searched, sent or shown; :func:`extract_json` finds the
JSON in a reply: the whole text, a fenced block, or the first object in prose.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["NO_JSON", "arguments_text", "as_text", "extract_json", "json_text", "json_value", "pretty_json", "whole_json"]


class _NoJSON:
    def __repr__(self) -> str:
        return "NO_JSON"


NO_JSON: Any = _NoJSON()
"""Returned when the text holds no JSON (JSON ``null`` is a real value)."""

def as_text(value: Any, *, ensure_ascii: bool = False) -> str:
    """``value`` as text: a string as it is, anything else as JSON (what JSON cannot hold, as its ``str``)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=ensure_ascii, default=str)


def pretty_json(value: Any, *, sort_keys: bool = False) -> str:
    """``value`` as indented JSON for people to read, a string as it is (``repr`` if it is no JSON at all)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=sort_keys, default=str)
    except (TypeError, ValueError):  # a circular structure, keys JSON cannot hold
        return repr(value)


def json_value(value: Any) -> Any:
    """``value`` as JSON holds it (tuples as lists, other objects as their ``str``), so that it
    compares equal to the same value read back from a JSON file."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def json_text(value: Any) -> str:
    """``value`` as compact JSON for people to read (strings quoted; ``repr`` if it is no JSON at all)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def arguments_text(arguments: Any) -> str:
    """Tool arguments as the console tree writes them, on one line: ``{amount: 3500, type: "travel"}``."""
    if arguments is None:
        return ""
    if isinstance(arguments, dict):
        text = "{" + ", ".join(f"{key}: {json_text(value)}" for key, value in arguments.items()) + "}"
    else:
        text = arguments if isinstance(arguments, str) else json_text(arguments)
    return " ".join(text.split())


def whole_json(text: str) -> Any:
    """The JSON object or array that is the whole of ``text`` (spaces aside), or :data:`NO_JSON`:
    a reply that *is* structured data, unlike one that has JSON somewhere in it (:func:`extract_json`)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return NO_JSON
    try:
        return json.loads(stripped)
    except ValueError:
        return NO_JSON


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: Any) -> Any:
    """The JSON value in ``text``, or :data:`NO_JSON`.

    Tries, in order: the text itself, each fenced code block, then the first
    decodable object (else array) that starts anywhere in the prose.
    """
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if not stripped:
        return NO_JSON
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip())
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for opener in ("{", "["):  # an object is what an LLM usually means; "[1]" in prose is not
        for match in re.finditer(re.escape(opener), text):
            try:
                value, _ = decoder.raw_decode(text, match.start())
                return value
            except ValueError:
                continue
    return NO_JSON
