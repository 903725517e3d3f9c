"""Finding runs on disk and reading their results into Arrow tables for ``farm report``.

A run is a folder with ``cases.parquet`` (and ``turns.parquet``,
``assertions.parquet``, ``run.json``); a results folder holds runs as
subfolders; a single Parquet cases table or a results JSONL file is a run too.
Only the columns the analysis needs are read, and only the assertion rows that
did not pass.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from farm.errors import UsageError
from farm.results import CaseResult
from farm.writers import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    RUN_JSON,
    TURNS_SCHEMA,
    read_jsonl_results,
    read_run_json,
    rows_from_result,
)

__all__ = ["CASE_RUN_KEY", "RunSource", "RunTables", "find_runs", "load_runs"]

CASE_RUN_KEY = ["run_id", "run_index", "attempt", "case_id"]
"""What names one case run across the cases, turns and assertions tables."""
_CASE_COLUMNS = [
    *CASE_RUN_KEY, "name", "status", "agent", "total_turns", "duration_ms",
    "prompt_tokens", "completion_tokens", "total_tokens", "started_at", "error", "source", "retried", "rescorable",
    "cost_usd", "role_cost_usd",
]  # fmt: skip
_ADDED_LATER = {"retried": 0, "rescorable": None, "cost_usd": None, "role_cost_usd": None}
"""Case columns a run of an older farm lacks, and the value they read as."""
_TURN_COLUMNS = [*CASE_RUN_KEY, "turn", "duration_ms"]
_ASSERTION_COLUMNS = ["run_id", "case_id", "scope", "checkpoint_id", "type", "passed", "message", "required"]


@dataclass
class RunSource:
    """Where one run's (or one file's) results are."""

    path: Path
    cases: Path
    turns: Path | None = None
    assertions: Path | None = None
    jsonl: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    """``run.json`` when there is one."""


def find_runs(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[RunSource], list[str]]:
    """The result sources under ``paths`` and notes on folders passed over.

    Raises :class:`~farm.errors.UsageError` when a path does not exist or no
    results are found at all.
    """
    if not paths:
        raise UsageError("Cannot report, as no path was given; name a run folder, a results folder or a results file.")
    sources: list[RunSource] = []
    notes: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"Cannot report on {path}, as it does not exist.")
        if path.is_file():
            sources.append(_file_source(path))
        elif (path / "cases.parquet").is_file():
            sources.append(_run_source(path))
        else:
            runs = sorted(child for child in path.iterdir() if (child / "cases.parquet").is_file())
            waiting = sorted(
                child.name for child in path.iterdir()
                if child.is_dir() and not (child / "cases.parquet").exists() and (child / ".parts").is_dir()
            )  # fmt: skip
            if waiting:
                notes.append(
                    f"Skipped {len(waiting)} run folder(s) with no cases.parquet yet (still running, or killed "
                    f"before consolidating; `farm test --resume` finishes them): {', '.join(waiting[:5])}"
                    + (" …" if len(waiting) > 5 else "")
                )
            if not runs:
                here = "it or its subfolders"
                if (path / ".parts").is_dir():
                    here = "it (its .parts/ are not consolidated yet: resume the run with `farm test --resume`)"
                raise UsageError(f"Cannot report on {path}, as there is no cases.parquet in {here}.")
            sources.extend(_run_source(run) for run in runs)
    unique: dict[Path, RunSource] = {}
    for source in sources:
        unique.setdefault(source.cases.resolve(), source)
    return list(unique.values()), notes


def _run_source(folder: Path) -> RunSource:
    info: dict[str, Any] = {}
    if (folder / RUN_JSON).is_file():
        try:
            info = read_run_json(folder).model_dump()
        except UsageError:
            info = {}
    turns, assertions = folder / "turns.parquet", folder / "assertions.parquet"
    return RunSource(
        path=folder,
        cases=folder / "cases.parquet",
        turns=turns if turns.is_file() else None,
        assertions=assertions if assertions.is_file() else None,
        info=info,
    )


def _file_source(path: Path) -> RunSource:
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return RunSource(path=path, cases=path, jsonl=True)
    if suffix != ".parquet":
        raise UsageError(f"Cannot report on {path}, as it is neither a .parquet nor a .jsonl file.")
    if (
        path.name in ("cases.parquet", "turns.parquet", "assertions.parquet")
        and (path.parent / "cases.parquet").is_file()
    ):
        return _run_source(path.parent)
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"Cannot report on {path}, as it is not a readable Parquet file ({exc}).") from None
    if "status" not in names:
        raise UsageError(f"Cannot report on {path}, as it is not a cases table (it has no status column).")
    return RunSource(path=path, cases=path)


@dataclass
class RunTables:
    """The rows of every run read, as the analysis needs them (only the columns it uses)."""

    cases: pa.Table
    turns: pa.Table
    failed: pa.Table
    """Assertion rows that did not pass."""


def _projected(schema: pa.Schema, columns: list[str]) -> pa.Schema:
    return pa.schema([schema.field(name) for name in columns])


def _read(path: Path, schema: pa.Schema, columns: list[str], filters: Any = None) -> pa.Table:
    try:
        present = set(pq.read_schema(path).names)
        missing = [name for name in columns if name not in present and name not in _ADDED_LATER]
        if missing:
            raise UsageError(
                f"Cannot report on {path}, as it lacks the columns {', '.join(missing)}; "
                "it was not written by this version of the farm."
            )
        table = pq.read_table(path, columns=[name for name in columns if name in present], filters=filters)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError(f"Cannot report on {path}, as it cannot be read ({exc}).") from None
    for name in columns:
        if name not in present:
            table = table.append_column(name, pa.array([_ADDED_LATER[name]] * table.num_rows, schema.field(name).type))
    return table.select(columns).cast(_projected(schema, columns))


def _read_jsonl(path: Path) -> tuple[pa.Table, pa.Table, pa.Table]:
    cases: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    assertions: list[dict[str, Any]] = []
    for number, record in enumerate(read_jsonl_results(path), 1):
        try:
            result = CaseResult.model_validate(record)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise UsageError(
                f"Cannot report on {path}, as result {number} is not a case result ({where}: {problem['msg']})."
            ) from None
        case_row, turn_rows, assertion_rows = rows_from_result(result)
        cases.append(case_row)
        turns.extend(turn_rows)
        assertions.extend(row for row in assertion_rows if not row["passed"])
    return (
        pa.Table.from_pylist(cases, schema=CASES_SCHEMA).select(_CASE_COLUMNS),
        pa.Table.from_pylist(turns, schema=TURNS_SCHEMA).select(_TURN_COLUMNS),
        pa.Table.from_pylist(assertions, schema=ASSERTIONS_SCHEMA).select(_ASSERTION_COLUMNS),
    )


def load_runs(sources: list[RunSource]) -> tuple[RunTables, dict[str, RunSource]]:
    """The tables of ``sources``, concatenated, and which source each run id came from.

    The cases table gains a ``suite`` column: its ``source`` without the line.
    """
    cases, turns, failed = [], [], []
    origin: dict[str, RunSource] = {}
    turn_schema = _projected(TURNS_SCHEMA, _TURN_COLUMNS)
    assertion_schema = _projected(ASSERTIONS_SCHEMA, _ASSERTION_COLUMNS)
    for source in sources:
        if source.jsonl:
            case_table, turn_table, failed_table = _read_jsonl(source.cases)
        else:
            case_table = _read(source.cases, CASES_SCHEMA, _CASE_COLUMNS)
            turn_table = _read(source.turns, TURNS_SCHEMA, _TURN_COLUMNS) if source.turns else turn_schema.empty_table()
            failed_table = (
                _read(source.assertions, ASSERTIONS_SCHEMA, _ASSERTION_COLUMNS, filters=pc.field("passed") == False)  # noqa: E712
                if source.assertions
                else assertion_schema.empty_table()
            )
        for run_id in pc.unique(case_table["run_id"]).to_pylist():
            origin.setdefault(run_id, source)
        cases.append(case_table)
        turns.append(turn_table)
        failed.append(failed_table)
    all_cases = pa.concat_tables(cases).combine_chunks()
    source = pc.fill_null(all_cases["source"], "")
    all_cases = all_cases.append_column("suite", pc.replace_substring_regex(source, pattern=r":\d+$", replacement=""))
    return (
        RunTables(
            cases=all_cases,
            turns=pa.concat_tables(turns).combine_chunks(),
            failed=pa.concat_tables(failed).combine_chunks(),
        ),
        origin,
    )
