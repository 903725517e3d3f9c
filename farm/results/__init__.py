"""What a run produces, and how to read it back.

The records (:class:`CaseResult` and its parts) are what a run writes: one JSONL line per case
run, and the rows of the Parquet tables. The reader reads a run folder back as one typed object,
as inspect-ai's ``read_eval_log`` reads an eval log: :func:`read_run` for one run, :func:`list_runs`
for every run of a results folder, and :func:`read_runs` for a table of many runs as one lazy
pyarrow dataset (``farm report``'s trend, DuckDB, pandas). ``farm report``, ``farm view`` and ``farm rescore`` read runs
through it, and so can a notebook::

    from farm.results import list_runs

    for run in list_runs("farm-results"):
        print(run.run_id, run.info.status, run.problems)
        cases = run.cases(columns=["agent", "case_id", "status"])  # a pyarrow Table

A case run is named within its run by :class:`CaseRunKey`, in every table by :data:`CASE_RUN_KEY`,
and a case across runs by :data:`CASE_KEY` (its suite and id; ``run.cases(columns=["suite",
"case_id"])``, :meth:`RunRecord.suite_of`): every comparison of two runs pairs a case only with the
same case. The run folder's layout is spelled once, in :mod:`farm.results._folder`. The reader (and pyarrow with it) is
imported on first use: the run path imports this package for its records only.
The records live in :mod:`farm.results._records`, which the modules beneath the reader (the
writers, and the config and secrets they use) import directly: this package names the reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from farm.results._folder import CASE_RUN_KEY, CaseRunKey
from farm.results._records import (
    ACTUAL_LIMIT,
    BLAME,
    CASE_KEY,
    NO_REPLY,
    OUTPUT_LIMIT,
    SCHEMA_VERSION,
    SIM_FLAGS,
    AssertionResult,
    Blame,
    CaseResult,
    CheckpointResult,
    EndedBy,
    ErrorRole,
    InputSource,
    RetriedAttempt,
    RoleCall,
    SpanRecord,
    StabilityClass,
    Status,
    StepReply,
    ToolCallRecord,
    TurnResult,
    Usage,
    add_cost,
    blame_text,
    clip_output,
    format_usd,
    stability_class,
)

if TYPE_CHECKING:
    from farm.results._dataset import read_runs
    from farm.results._reader import RunRecord, list_runs, read_run, runs_at

__all__ = [
    "ACTUAL_LIMIT",
    "BLAME",
    "CASE_KEY",
    "CASE_RUN_KEY",
    "OUTPUT_LIMIT",
    "NO_REPLY",
    "SCHEMA_VERSION",
    "SIM_FLAGS",
    "AssertionResult",
    "Blame",
    "CaseResult",
    "CaseRunKey",
    "CheckpointResult",
    "EndedBy",
    "ErrorRole",
    "InputSource",
    "RetriedAttempt",
    "RoleCall",
    "SpanRecord",
    "RunRecord",
    "StabilityClass",
    "Status",
    "StepReply",
    "ToolCallRecord",
    "TurnResult",
    "Usage",
    "add_cost",
    "blame_text",
    "clip_output",
    "format_usd",
    "list_runs",
    "read_run",
    "read_runs",
    "runs_at",
    "stability_class",
]

_READER = ("RunRecord", "list_runs", "read_run", "runs_at")


def __getattr__(name: str) -> Any:  # the reader (and pyarrow) on first use
    if name in _READER:
        from farm.results import _reader

        return getattr(_reader, name)
    if name == "read_runs":
        from farm.results._dataset import read_runs

        return read_runs
    raise AttributeError(f"module 'farm.results' has no attribute {name!r}")
