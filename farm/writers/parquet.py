"""Parquet results: three tables per run, with ``run_id`` on every row.

A run folder holds ``cases.parquet``, ``turns.parquet`` and
``assertions.parquet`` (zstd; :mod:`farm.results._folder` names them). Many run
folders read as one dataset, every schema version's columns unified::

    farm.results.read_runs("farm-results")                      # a pyarrow dataset
    duckdb.sql("select status, count(*) from read_parquet('farm-results/*/cases.parquet', union_by_name=true) group by all")

The columns are the fields of the row models in :mod:`farm.writers.rows`
(:class:`~farm.writers.rows.CaseRow`, :class:`~farm.writers.rows.TurnRow`,
:class:`~farm.writers.rows.AssertionRow`), where each is defined once and
documented; ``docs/results.md`` lists them. Names and types are stable;
``schema_version`` (on ``cases``) changes when one changes meaning or type.
Columns holding arbitrary values (``expected``, ``actual``, a tool call's
``args`` and ``result``) are JSON text, so ``json.loads`` (or DuckDB's
``::JSON``) gives the value back; a missing value is a null, not the text
``null``.

While a run is going, :class:`ParquetWriter` writes immutable part files to
``.parts/`` (a Parquet file whose writer dies before closing cannot be read);
``close()`` or :func:`consolidate` merges them into the three tables. Each
consolidated table records in its metadata the last part number it holds, so
a consolidation interrupted after replacing a table but before deleting the
parts never counts a part twice.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.errors import UsageError
from farm.files import atomic_file
from farm.results._folder import LAST_PART_KEY, OPTIONAL_TABLES, PARTS_DIR, TABLES, part_path, parts, table_path
from farm.results._records import CaseResult
from farm.writers.base import ClosingWriter
from farm.writers.rows import AssertionRow, CaseRow, KeyRow, Row, SpanRow, TurnRow

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

__all__ = [
    "ASSERTIONS_SCHEMA",
    "OPTIONAL",
    "SPANS_SCHEMA",
    "CASES_SCHEMA",
    "TURNS_SCHEMA",
    "ParquetWriter",
    "consolidate",
    "rows_from_result",
]

COMPRESSION = "zstd"
#: A consolidated row group is cut at this many rows or bytes, whichever comes first.
ROW_GROUP_ROWS = 100_000
ROW_GROUP_BYTES = 64 << 20

OPTIONAL = OPTIONAL_TABLES
"""Tables written only by a run that has rows for them: a run that captured no span has no ``spans.parquet``."""


@functools.cache
def _schemas() -> dict[str, pa.Schema]:
    """Each table's columns: the fields of its row model (:func:`farm.writers.arrowschema.arrow_schema`).

    pyarrow is imported here, on first use, not when this module is: a run writes its buffered
    rows only at its first part or its end, and loads pyarrow while it waits for its agents
    (:meth:`ParquetWriter.prepare`) instead of before its first request."""
    from farm.writers.arrowschema import arrow_schema

    return {"cases": arrow_schema(CaseRow), "turns": arrow_schema(TurnRow), "assertions": arrow_schema(AssertionRow), "spans": arrow_schema(SpanRow)}


_SCHEMA_NAMES = {"CASES_SCHEMA": "cases", "TURNS_SCHEMA": "turns", "ASSERTIONS_SCHEMA": "assertions", "SPANS_SCHEMA": "spans"}
"""``CASES_SCHEMA``: the columns of ``cases.parquet``, the fields of :class:`~farm.writers.rows.CaseRow`;
``TURNS_SCHEMA`` and ``ASSERTIONS_SCHEMA`` likewise (built on first use, see :func:`_schemas`)."""


if TYPE_CHECKING:
    CASES_SCHEMA: pa.Schema
    TURNS_SCHEMA: pa.Schema
    ASSERTIONS_SCHEMA: pa.Schema
    SPANS_SCHEMA: pa.Schema


def __getattr__(name: str) -> Any:
    if name in _SCHEMA_NAMES:
        return _schemas()[_SCHEMA_NAMES[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- rows ------------------------------------------------------------------


def rows_from_result(result: CaseResult) -> tuple[Row, list[Row], list[Row], list[Row]]:
    """One result as ``(case row, turn rows, assertion rows, span rows)``, keyed to the schemas."""
    key = KeyRow.of(result)
    turn_rows: list[Row] = []
    assertion_rows: list[Row] = []
    span_rows: list[Row] = []
    for turn in result.turns:
        turn_rows.append(TurnRow.from_turn(key, turn))
        span_rows.extend(SpanRow.from_span(key, turn.turn, span) for span in turn.spans)
        for position, assertion in enumerate(turn.assertions):
            assertion_rows.append(AssertionRow.from_assertion(key, "turn", turn.turn, position, assertion))
    for position, assertion in enumerate(result.final_assertions):
        assertion_rows.append(AssertionRow.from_assertion(key, "final", None, position, assertion))
    for position, checkpoint in enumerate(result.checkpoints):
        assertion_rows.append(AssertionRow.from_checkpoint(key, position, checkpoint))
    return CaseRow.from_result(result), turn_rows, assertion_rows, span_rows


# --- writing -----------------------------------------------------------------


class ParquetWriter(ClosingWriter):
    """Writes results into ``run_dir`` as the three Parquet tables.

    Rows are buffered and written as an immutable part file per table once a
    buffer holds ``rows_per_part`` rows or its oldest row is
    ``seconds_per_part`` old (checked on each write), and on ``flush``. Only
    the current buffer is held in memory. ``close`` writes the last part and
    consolidates. A writer opened on a folder that already has tables or
    parts (a resume) numbers its parts after theirs, and ``close`` merges
    old and new rows.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        rows_per_part: int = 5000,
        seconds_per_part: float = 10.0,
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.run_dir = Path(run_dir)
        self._parts_dir = self.run_dir / PARTS_DIR
        self._parts_dir.mkdir(parents=True, exist_ok=True)
        self._rows_per_part = rows_per_part
        self._seconds_per_part = seconds_per_part
        self._clock = clock
        self._next_part = _last_part_number(self.run_dir) + 1
        self._buffers: dict[str, list[Row]] = {table: [] for table in TABLES}
        self._oldest: float | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, result: CaseResult) -> None:
        if self._closed:
            raise ValueError(f"Cannot write a result, as the Parquet writer for {self.run_dir} has been closed.")
        case_row, turn_rows, assertion_rows, span_rows = rows_from_result(result)
        self._buffers["cases"].append(case_row)
        self._buffers["turns"].extend(turn_rows)
        self._buffers["assertions"].extend(assertion_rows)
        self._buffers["spans"].extend(span_rows)
        if self._oldest is None:
            self._oldest = self._clock()
        full = max(len(rows) for rows in self._buffers.values()) >= self._rows_per_part
        if full or self._clock() - self._oldest >= self._seconds_per_part:
            self._write_part()

    def prepare(self) -> None:
        """Import pyarrow and build each table from one row of nulls, so that the first part or
        the close does not pay for pyarrow's start (its import and its first conversions, ~50 ms
        on two cores); a run calls this while it waits for its agents' first replies."""
        import pyarrow as pa

        for schema in _schemas().values():
            pa.Table.from_pylist([dict.fromkeys(schema.names)], schema=schema)

    def flush(self) -> None:
        """Write what is buffered as a part file (costly if called after every result)."""
        if not self._closed:
            self._write_part()

    def close(self) -> None:
        """Write the last part and consolidate the run's tables; the parts are then removed.

        When no part was written and the folder has no tables (a run that ended within
        ``rows_per_part`` rows and ``seconds_per_part``), the buffers are written as the
        tables themselves: writing a part to read it back costs a small run more CPU
        after its last case than the rest of its Parquet work."""
        if self._closed:
            return
        if self._next_part == 1 and not any(table_path(self.run_dir, table).exists() for table in TABLES):
            self._write_tables()
        else:
            self._write_part()
        self._closed = True
        consolidate(self.run_dir)

    def _write_tables(self) -> None:
        """The buffers as the three consolidated tables, holding part 1 (as a consolidation would)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for table, schema in _schemas().items():
            rows = self._buffers[table]
            if table in OPTIONAL and not rows:
                continue
            whole = pa.Table.from_pylist(rows, schema=schema.with_metadata({LAST_PART_KEY: b"1"}))
            with atomic_file(table_path(self.run_dir, table), "wb") as sink:
                pq.write_table(whole, sink, compression=COMPRESSION, row_group_size=max(1, whole.num_rows))
            rows.clear()
        self._next_part = 2

    def _write_part(self) -> None:
        if not any(self._buffers.values()):
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        for table, rows in self._buffers.items():
            if rows:
                part = pa.Table.from_pylist(rows, schema=_schemas()[table])
                with atomic_file(part_path(self.run_dir, table, self._next_part), "wb") as sink:
                    pq.write_table(part, sink, compression=COMPRESSION)
        _fsync_dir(self._parts_dir)
        # Buffers are cleared only once every part is in place: a failed write is retried
        # whole, under the same part number, by the next write/flush/close.
        for rows in self._buffers.values():
            rows.clear()
        self._next_part += 1
        self._oldest = None


# --- consolidating -----------------------------------------------------------


def consolidate(run_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Merge ``run_dir``'s part files into its three tables; return each table's row count.

    Rows already in a table (an earlier consolidation, a resumed run) are kept
    and come first; parts follow in the order they were written. Rows are
    streamed a row group at a time, never all held at once. Every table file
    exists afterwards, empty if it has no rows (but an :data:`OPTIONAL` one with
    none), and ``.parts/`` is gone.
    Safe to run again after it was interrupted.
    """
    run_dir = Path(run_dir)
    parts_dir = run_dir / PARTS_DIR
    written = parts(run_dir)
    counts = {
        table: _consolidate_table(run_dir, table, schema, written.get(table, []))
        for table, schema in _schemas().items()
        if table not in OPTIONAL or written.get(table) or table_path(run_dir, table).exists()
    }
    _fsync_dir(run_dir)
    if parts_dir.is_dir():
        merged = {path for listed in written.values() for _, path in listed}
        for path in parts_dir.iterdir():
            # Every listed part is in its table now; a *.tmp was never finished.
            if path in merged or path.name.endswith(".tmp"):
                path.unlink()
        try:
            parts_dir.rmdir()
        except OSError:  # something we did not write is in there: leave it
            pass
    return counts


def _consolidate_table(run_dir: Path, table: str, schema: pa.Schema, parts: list[tuple[int, Path]]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = table_path(run_dir, table)
    merged = _last_part_in(target)
    new = [(number, path) for number, path in parts if number > merged]
    if target.exists() and not new:
        return pq.read_metadata(target).num_rows
    sources = ([target] if target.exists() else []) + [path for _, path in new]
    last = max([merged, *(number for number, _ in new)])
    rows = 0
    with atomic_file(target, "wb") as sink:
        with pq.ParquetWriter(
            sink, schema.with_metadata({LAST_PART_KEY: str(last).encode()}), compression=COMPRESSION
        ) as writer:
            pending: list[pa.Table] = []
            pending_rows = pending_bytes = 0
            for source in sources:
                for batch in pq.ParquetFile(source).iter_batches():
                    pending.append(_conform(pa.Table.from_batches([batch]), schema, source))
                    pending_rows += batch.num_rows
                    pending_bytes += batch.nbytes
                    if pending_rows >= ROW_GROUP_ROWS or pending_bytes >= ROW_GROUP_BYTES:
                        rows += _write_row_group(writer, pending)
                        pending_rows = pending_bytes = 0
            rows += _write_row_group(writer, pending)
    return rows


def _write_row_group(writer: pq.ParquetWriter, pending: list[pa.Table]) -> int:
    """Write ``pending`` as one row group and empty it; return its row count."""
    import pyarrow as pa

    if not pending:
        return 0
    group = pa.concat_tables(pending)
    pending.clear()
    if group.num_rows:
        writer.write_table(group, row_group_size=group.num_rows)
    return group.num_rows


def _conform(table: pa.Table, schema: pa.Schema, source: Path) -> pa.Table:
    missing = [name for name in schema.names if name not in table.column_names]
    if missing:
        raise UsageError(
            f"Cannot consolidate {source}, as it lacks the columns {', '.join(missing)}; "
            "it was written by another version of the farm."
        )
    table = table.select(schema.names)
    return table if table.schema.equals(schema) else table.cast(schema)  # a part this farm wrote is already the schema


def _last_part_in(target: Path) -> int:
    """The last part number merged into a consolidated table (0 when none or no table)."""
    if not target.exists():
        return 0
    import pyarrow.parquet as pq

    metadata = pq.read_schema(target).metadata or {}
    return int(metadata.get(LAST_PART_KEY, b"0"))


def _last_part_number(run_dir: Path) -> int:
    """The highest part number used in ``run_dir``, written out or already merged."""
    numbers = [number for listed in parts(run_dir).values() for number, _ in listed]
    numbers += [_last_part_in(table_path(run_dir, table)) for table in TABLES]
    return max(numbers, default=0)


def _fsync_dir(path: Path) -> None:
    """Make renames and deletions in ``path`` durable (where the platform allows)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
