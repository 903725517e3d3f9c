"""The runs ``farm report`` reads, found under its paths and read through :mod:`farm.results`.

A path is a run folder, a results folder whose subfolders are runs, or a single results file
(a Parquet cases table, a results JSONL). Only the columns the analysis needs are read, and only
the assertion rows that did not pass. A run the reader found problems in is reported as far as
it could be read, and its problems become the report's notes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from farm.errors import UsageError
from farm.results import CASE_RUN_KEY, RunRecord, read_run, runs_at
from farm.results._folder import PARTS_DIR, table_path

__all__ = ["CASE_RUN_KEY", "RunTables", "find_runs", "load_runs"]

_CASE_COLUMNS = [
    *CASE_RUN_KEY, "name", "status", "total_turns", "duration_ms",
    "prompt_tokens", "completion_tokens", "total_tokens", "started_at", "error", "source", "retried", "rescorable",
    "cost_usd", "role_cost_usd", "error_role", "blame", "stopped", "tries", "verdict",
]  # fmt: skip
_TURN_COLUMNS = [*CASE_RUN_KEY, "turn", "duration_ms"]
_ASSERTION_COLUMNS = [*CASE_RUN_KEY, "scope", "checkpoint_id", "type", "passed", "message", "required", "error"]


def find_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[RunRecord], list[str]]:
    """The runs under ``paths`` and notes on folders passed over.

    Raises :class:`~farm.errors.UsageError` when a path does not exist or holds no results at all.
    """
    if not paths:
        raise UsageError("Cannot report, as no path was given; name a run folder, a results folder or a results file.")
    found: list[RunRecord] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"Cannot report on {path}, as it does not exist.")
        if path.is_file():
            found.append(read_run(path))
            continue
        runs, single = runs_at(path)
        done = [run for run in runs if run.finished_tables]
        waiting = sorted(run.name for run in runs if not run.finished_tables and run.unconsolidated)
        if waiting and not single:
            notes.append(
                f"Skipped {len(waiting)} run folder(s) with no {table_path('', 'cases')} yet (still running, or killed "
                f"before consolidating; `farm test --resume` finishes them): {', '.join(waiting[:5])}"
                + (" …" if len(waiting) > 5 else "")
            )
        empty = sorted(run.name for run in runs if not run.finished_tables and not run.unconsolidated)
        if empty and not single:
            notes.append(
                f"Skipped {len(empty)} run folder(s) with no case result (stopped or interrupted before a case ended): "
                + ", ".join(empty[:5]) + (" …" if len(empty) > 5 else "")
            )
        if not done:
            here = "it or its subfolders"
            if single and waiting:
                here = f"it (its {PARTS_DIR}/ are not consolidated yet: resume the run with `farm test --resume`)"
            raise UsageError(f"Cannot report on {path}, as there is no {table_path('', 'cases')} in {here}.")
        found.extend(done)
    unique: dict[Path, RunRecord] = {}
    for run in found:
        unique.setdefault(run.path.resolve(), run)
    return list(unique.values()), notes


@dataclass
class RunTables:
    """The rows of every run read, as the analysis needs them (only the columns it uses)."""

    cases: pa.Table
    turns: pa.Table
    failed: pa.Table
    """Assertion rows that failed: not passed, and judged (an assertion that could not be
    evaluated, its judge failed or its agent emitted no span, is the case's error, not a failure)."""


def _failures(rows: pa.Table) -> pa.Table:
    """The rows of ``rows`` that are verdicts, not errors (``error`` true: nothing was judged)."""
    return rows.filter(pc.invert(pc.fill_null(rows["error"], False)))


def load_runs(runs: list[RunRecord]) -> tuple[RunTables, dict[str, RunRecord], list[str]]:
    """The tables of ``runs``, concatenated, which run each run id came from, and each run's problems
    (one note each). The cases table has each case run's ``suite``, as its run's reader works it out:
    with ``case_id``, what pairs a case across runs (:data:`~farm.results.CASE_KEY`)."""
    cases, turns, failed = [], [], []
    origin: dict[str, RunRecord] = {}
    problems: list[str] = []
    for run in runs:
        case_table = run.cases(_CASE_COLUMNS)
        for run_id in pc.unique(case_table["run_id"]).to_pylist():
            origin.setdefault(run_id, run)
        cases.append(case_table)
        turns.append(run.turns(_TURN_COLUMNS))
        failed.append(_failures(run.assertions(_ASSERTION_COLUMNS, filters=pc.field("passed") == False)))  # noqa: E712
        problems.extend(f"{run.name}: {problem}" for problem in run.problems)
    tables = RunTables(
        cases=pa.concat_tables(cases).combine_chunks(),
        turns=pa.concat_tables(turns).combine_chunks(),
        failed=pa.concat_tables(failed).combine_chunks(),
    )
    return tables, origin, problems
