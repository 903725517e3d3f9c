"""Durations as users write them: ``30s``, ``2m``, ``1h``, ``1500ms``, Go's ``2m30s`` or a number of seconds."""

from __future__ import annotations

import math
import re

__all__ = ["parse_duration", "format_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_LONGEST = 366 * 86400.0
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_GO = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|h|m|s))+$")
"""Go's compound form, as Yao writes it: ``2m30s``, ``1h30m``, ``1m500ms``."""


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ``ValueError`` with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a duration (use e.g. 30s, 2m, 1h, 2m30s)")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise ValueError("a duration must be positive")
        if value > _LONGEST or not math.isfinite(value):
            raise ValueError("a duration must be finite (at most a year)")
        return float(value)
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match:
            return _checked(float(match.group(1)) * _UNITS[match.group(2) or "s"])
        compact = value.strip()
        if _GO.match(compact):
            return _checked(sum(float(n) * _UNITS[unit] for n, unit in _GO_PART.findall(compact)))
    raise ValueError(f"'{value}' is not a duration (use e.g. 30s, 2m, 1h, 2m30s)")


def _checked(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("a duration must be positive")
    if not math.isfinite(seconds) or seconds > _LONGEST:
        raise ValueError("a duration must be finite (at most a year)")
    return seconds


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m{secs:04.1f}s"
