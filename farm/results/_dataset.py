"""Many runs as one dataset: :func:`read_runs`.

One run is read by :func:`~farm.results.read_run`; a results folder of many, for a question
across them (the pass rate per agent per run, a case's history), is one lazy
:class:`pyarrow.dataset.Dataset` of one table of every run::

    from farm.results import read_runs

    cases = read_runs("farm-results")
    passed = cases.to_table(columns=["run_id", "agent", "status"], filter=pc.field("agent") == "bot")

Each run's Parquet files (its consolidated table and, for a run still going, its parts) are
fragments of the dataset, read only when a scan asks for them, and only the columns and row
groups it asks for: the filters and the column selection are pushed down to the files. The
columns are this farm's (:data:`~farm.results._reader.TABLES`), whatever version wrote a run: a
column an older run lacks reads as null. Every row says which run it belongs to (``run_id``),
when that run started (:data:`RUN_STARTED_AT`) and its gate's verdict (:data:`RUN_VERDICT`),
which come from the run's ``run.json`` and are constant over the run's files, so a filter on
them skips a run without opening it.

A run written before schema 7 (its files have no ``suite``), or a run with no Parquet (only its
results JSONL), is read whole when the dataset is made, through its :class:`RunRecord`, which
works out each row's suite; every other run's ``suite`` is the suite as the run named it
(:func:`~farm.results._suites.suite_of`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from farm.errors import UsageError
from farm.results._folder import RUN_JSON
from farm.results._reader import _DAMAGED, _REQUIRED, SUITE, TABLES, RunRecord, list_runs, read_run

__all__ = ["RUN_COLUMNS", "RUN_STARTED_AT", "RUN_VERDICT", "read_runs"]

RUN_STARTED_AT = "run_started_at"
"""The column of every row of :func:`read_runs`: when its run (the run's first part) started, UTC;
null when the run's ``run.json`` does not say."""

RUN_VERDICT = "run_verdict"
"""The column of every row of :func:`read_runs`: its run's gate verdict (``passed``, ``failed``;
``run.json``'s ``gate``), null for a run still going or one that recorded no gate."""

RUN_COLUMNS = pa.schema([pa.field(RUN_STARTED_AT, pa.timestamp("ms", tz="UTC")), pa.field(RUN_VERDICT, pa.string())])
"""The columns :func:`read_runs` adds to a table's, from each run's ``run.json``."""

_FORMAT = ds.ParquetFileFormat()
_LOCAL = pafs.LocalFileSystem()


def read_runs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *, table: str = "cases", problems: list[str] | None = None
) -> ds.Dataset:
    """The ``table`` (``cases``, ``turns``, ``assertions`` or ``spans``) of every run under ``paths``
    as one lazy :class:`pyarrow.dataset.Dataset`. A path is a run folder, a results folder whose
    folders are runs, or a results file (a Parquet cases table, a results JSONL). A run with no
    such table (no spans captured) adds no rows.

    The dataset's columns are ``table``'s, then :data:`RUN_COLUMNS`; every row has its case run's
    key (:data:`~farm.results.CASE_RUN_KEY`: ``run_id``, ``agent``, ``suite``, ``case_id``,
    ``run_index`` (the try) and ``attempt``). Nothing is read but each file's footer until the
    dataset is scanned (``to_table(columns=..., filter=...)``, DuckDB, Polars, ``to_batches``).

    A file that cannot be read, or was not written by this farm, is left out, and ``problems``
    (when given) learns it in one sentence, as does every problem of a run read whole.

    Raises :class:`~farm.errors.UsageError` when a path does not exist or ``table`` is no table."""
    if table not in TABLES:
        raise UsageError(f"Cannot read the runs' {table!r} table, as there is none; the tables are {', '.join(TABLES)}.")
    schema = pa.unify_schemas([TABLES[table], RUN_COLUMNS])
    runs = _runs([paths] if isinstance(paths, str | os.PathLike) else list(paths))
    noted = problems if problems is not None else []
    with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) * 2)) as pool:
        read = list(pool.map(lambda run: _run_part(run, table, schema, noted), runs))
    fragments = [fragment for lazy, _ in read for fragment in lazy]
    whole = [table for _, table in read if table is not None]
    lazy = ds.FileSystemDataset(fragments, schema, _FORMAT, _LOCAL)
    if not whole:
        return lazy
    return ds.dataset([lazy, ds.dataset(pa.concat_tables(whole), schema=schema)])


def _runs(paths: Sequence[str | os.PathLike[str]]) -> list[RunRecord]:
    """The runs under ``paths``, each once, in the order given (a results folder's by name)."""
    found: dict[Path, RunRecord] = {}
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"Cannot read the runs in {path}, as it does not exist.")
        try:
            runs = [read_run(path)]
        except UsageError:  # not a run itself: a results folder holding runs
            runs = list_runs(path)
        for run in runs:
            found.setdefault(run.path.resolve(), run)
    return list(found.values())


def _run_part(run: RunRecord, table: str, schema: pa.Schema, problems: list[str]) -> tuple[list[ds.Fragment], pa.Table | None]:
    """``run``'s share of the dataset: its files as fragments, or (a run before schema 7, or one
    with no Parquet) its rows, read whole."""
    started, verdict, agent = _run_json(run)
    known = {RUN_STARTED_AT: pa.scalar(started, RUN_COLUMNS.field(RUN_STARTED_AT).type), RUN_VERDICT: pa.scalar(verdict, pa.string())}
    files = run.table_files(table) if run.is_folder or table == "cases" else []
    if not files and not run.table_files("cases"):
        return [], _whole_run(run, table, schema, known, agent, problems)
    fragments = []
    for path in files:
        try:
            present = set(pq.read_schema(path).names)
        except FileNotFoundError:  # a part merged just now: the consolidated table holds it
            continue
        except _DAMAGED as exc:
            problems.append(f"{path} cannot be read ({str(exc).splitlines()[0]}); its rows are left out.")
            continue
        missing = sorted(_REQUIRED[table] - present)
        if missing:
            problems.append(f"{path} lacks the columns {', '.join(missing)} and was passed over; it was not written by this farm.")
            continue
        if SUITE not in present:  # written before schema 7: the reader works out each row's suite
            return [], _whole_run(run, table, schema, known, agent, problems)
        guarantees = dict(known)
        if "agent" not in present:  # a farm that wrote no agent tested one
            guarantees["agent"] = pa.scalar(agent, pa.string())
        fragments.append(_FORMAT.make_fragment(str(path), _LOCAL, partition_expression=_constant(guarantees)))
    return fragments, None


def _constant(values: dict[str, pa.Scalar]) -> ds.Expression:
    """What holds of every row of a file: each column of ``values`` is its value (null: is null).
    The scan fills a column the file lacks from it, and a filter on it skips the file unopened."""
    expression: ds.Expression | None = None
    for name, value in values.items():
        each = ds.field(name).is_null() if not value.is_valid else ds.field(name) == value
        expression = each if expression is None else expression & each
    assert expression is not None  # noqa: S101  (RUN_COLUMNS are always there)
    return expression


def _whole_run(run: RunRecord, table: str, schema: pa.Schema, known: dict[str, pa.Scalar], agent: str | None, problems: list[str]) -> pa.Table:
    """``run``'s ``table`` read through its reader, with :data:`RUN_COLUMNS`."""
    rows = run._suited(table, TABLES[table].names, None)
    if agent is not None:
        rows = rows.set_column(rows.schema.get_field_index("agent"), "agent", pc.fill_null(rows["agent"], agent))
    for name, value in known.items():
        rows = rows.append_column(name, pa.array([value.as_py()] * rows.num_rows, value.type))
    problems.extend(f"{run.name}: {problem}" for problem in run.problems)
    return rows.cast(schema)


def _run_json(run: RunRecord) -> tuple[int | None, str | None, str | None]:
    """The run's start (ms since the epoch), its gate's verdict and its (first) agent, from its
    ``run.json``: read here with :mod:`json` alone, as a run's three fields are all a dataset of a
    thousand runs needs of it (:attr:`RunRecord.info` validates the whole record)."""
    if not run.has_info:
        return None, None, None
    try:
        data = json.loads((run.path / RUN_JSON).read_bytes())
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(data, dict):
        return None, None, None
    started = data.get("started_at")
    gate = data.get("gate")
    verdict = gate.get("verdict") if isinstance(gate, dict) else None
    agent = data.get("agent")
    return (
        round(started * 1000) if isinstance(started, int | float) and not isinstance(started, bool) and abs(started) < 1e11 else None,
        verdict if verdict in ("passed", "failed") else None,
        agent if isinstance(agent, str) else None,
    )
