"""JSON found in what an LLM wrote: the whole text, a fenced block, or the first object in prose."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["extract_json", "NO_JSON"]


class _NoJSON:
    def __repr__(self) -> str:
        return "NO_JSON"


NO_JSON: Any = _NoJSON()
"""Returned when the text holds no JSON (JSON ``null`` is a real value)."""

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
