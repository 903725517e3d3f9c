"""What kind of thing one ``-i`` value names: a suite file (or folder, or glob), a message,
stdin, a generator or script tests (:func:`input_kind`), told apart by :data:`PATH_RULE` without
loading anything; and a generator's query, typed (:func:`typed_query`). :mod:`farm.inputs` turns
the values into sources of cases; a run folder's reader asks only what they were.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl

__all__ = ["PATH_RULE", "InputKind", "input_kind", "looks_like_path", "typed_query"]

PATH_RULE = (
    "A value that looks like a path is read as one: an existing file or folder, a glob (* or [...]), "
    "or a value with no whitespace that has a path separator or a file extension; "
    "a folder runs every *.jsonl in it, and a path that does not exist is an error. "
    "Anything else is a message: one single-turn case (a one-word message that is the name of a suite file "
    "here or a folder down is an error too)."
)
"""How ``-i`` tells a path from a message, as ``farm test --help`` and docs/guide.md say it."""

InputKind = Literal["file", "message", "stdin", "generator", "script-tests"]


EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
GLOB = re.compile(r"\*|\[[^\]]+\]")


def exists(value: str) -> bool:
    try:
        return Path(value).exists()
    except (OSError, ValueError):  # a name too long, a NUL byte: no such path
        return False


def looks_like_path(value: str) -> bool:
    """Whether ``-i value`` names a path (:data:`PATH_RULE`) rather than a message."""
    if not value:
        return False
    if exists(value):
        return True
    if any(ch.isspace() for ch in value):
        return False
    return "/" in value or os.sep in value or bool(EXTENSION.search(value)) or bool(GLOB.search(value))


def input_kind(value: str) -> InputKind:
    """What one ``-i`` value is: a path (``file``: a file, a folder or a glob), a message, stdin, a generator or script tests."""
    if value == "-":
        return "stdin"
    if value.startswith(("agents:", "scripts:")):
        return "generator"
    if value.startswith("scripts."):
        return "script-tests"
    return "file" if looks_like_path(value) else "message"


def typed_query(query: str) -> dict[str, Any]:
    """``count=3&focus=edge-cases&strict=true`` with values typed: int, float, bool, string; a key
    given more than once (``focus=a&focus=b``) is a list."""
    out: dict[str, Any] = {}
    for key, raw in parse_qsl(query, keep_blank_values=True):
        value = _typed(raw)
        if key in out:
            before = out[key]
            out[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            out[key] = value
    return out


def _typed(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw
