"""What a run ended with, and how a run is named: below both :func:`farm.run` and :func:`farm.rescore`."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from farm.summary import Summary

__all__ = ["RunResult", "new_run_id"]


@dataclass
class RunResult:
    """What a run ended with."""

    exit_code: int
    """0: every case passed its gate (every try passed, or ``min_pass_rate`` of them) or was skipped, and the
    run is not significantly worse than its ``baseline``; 1: any case below its gate, errored or timed out,
    the run significantly worse than its baseline, or the run stopped
    before every case ran (``--max-cost``, a lost engine); 2: bad input (a ``dry_run`` with problems);
    130: interrupted (resume with ``resume=run_dir``)."""
    run_dir: Path | None = None
    """The run folder (results, Parquet tables, ``run.json``); None for a dry run."""
    results: Path | None = None
    """The results JSONL."""
    summary: Summary | None = None
    """Counts of the whole run (earlier parts included after a resume)."""
    engine: str | None = None
    """``local`` or ``ray``."""
    run_id: str | None = None
    """The run's id: its folder's name under ``results_dir`` (a resumed run keeps its own)."""
    interrupted: bool = False
    """Whether Ctrl-C, SIGTERM or a lost engine ended the run before every case ran; the finished
    results are kept (``exit_code`` 130, or 1 when the engine was lost)."""


def new_run_id() -> str:
    """A fresh run id: the local start time, then six random hex digits (``20250101-120000-1a2b3c``),
    so run folders sort by time and two runs started in the same second do not collide."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
