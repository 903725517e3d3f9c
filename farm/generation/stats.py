"""What a generation did, as ``run.json`` records it: :class:`GenerationStats`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PROBLEMS_KEPT", "GenerationStats"]

PROBLEMS_KEPT = 100
"""Problem lines and renames kept in :class:`GenerationStats` (the counts count all)."""


@dataclass
class GenerationStats:
    """What a generation did, as ``run.json`` records it (``generation``)."""

    asked: int
    """Cases asked for (``count``)."""
    kept: int = 0
    """Valid, distinct cases accepted (those already in ``generated.jsonl`` on resume included)."""
    duplicates: int = 0
    """Cases dropped as the same as an earlier one (normalised input, turns, simulator goal)."""
    malformed: int = 0
    """Cases dropped because they failed ``farm validate``'s checks."""
    renamed: int = 0
    """Cases kept under a new id, because theirs was taken by a different case."""
    batches: int = 0
    """Generator requests answered (from the generator or the role cache); yields of a script."""
    calls: int = 0
    """Requests that reached the generator (not answered by the role cache): repeats of an answer
    that held no JSON and of a failed request included, and those still in flight when enough
    cases had arrived."""
    cost_usd: float | None = None
    """What those requests cost, in USD at the generator connector's ``price``; null without one."""
    stop_reason: str | None = None
    """One sentence when fewer cases than asked were generated, saying why."""
    cached: bool = False
    """Whether the whole generation was read from the role cache (no generator request)."""
    problems: list[str] = field(default_factory=list)
    """The first :data:`PROBLEMS_KEPT` dropped cases, one line each (``agents:gen batch 7, case 3: ...``)."""
    renames: list[str] = field(default_factory=list)
    """The first :data:`PROBLEMS_KEPT` renames (``refund -> refund-2 (agents:gen batch 7, case 3)``)."""

    def as_record(self) -> dict[str, Any]:
        """The record ``run.json`` keeps."""
        return dataclasses.asdict(self)

    def progress_text(self) -> str:
        """``generated 340/1000``, for the progress line."""
        return f"generated {self.kept}/{self.asked}"
