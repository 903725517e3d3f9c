"""Durations as users write them: ``30s``, ``2m``, ``1h``, ``1500ms`` or a number of seconds."""

from __future__ import annotations

import re

__all__ = ["parse_duration", "format_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(value: object) -> float:
    """Seconds in ``value``; raises ``ValueError`` with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError(f"'{value}' is not a duration (use e.g. 30s, 2m, 1h)")
    if isinstance(value, (int, float)):
        if value <= 0:
            raise ValueError("a duration must be positive")
        return float(value)
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match:
            seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
            if seconds <= 0:
                raise ValueError("a duration must be positive")
            return seconds
    raise ValueError(f"'{value}' is not a duration (use e.g. 30s, 2m, 1h)")


def format_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(seconds, 60)
    return f"{int(minutes)}m{secs:04.1f}s"
