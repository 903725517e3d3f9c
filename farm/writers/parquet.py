"""Parquet results: three tables per run, with ``run_id`` on every row.

A run folder holds ``cases.parquet``, ``turns.parquet`` and
``assertions.parquet`` (zstd). Many run folders read as one dataset::

    duckdb.sql("select status, count(*) from read_parquet('farm-results/*/cases.parquet') group by all")
    pyarrow.dataset.dataset([f"{d}/cases.parquet" for d in run_dirs])

The column names and types below are stable; ``schema_version`` (on
``cases``) changes when one changes meaning or type. Columns holding
arbitrary values (``expected``, ``actual``, a tool call's ``args`` and
``result``) are JSON text, so ``json.loads`` (or DuckDB's ``::JSON``) gives
the value back; a missing value is a null, not the text ``null``.

``cases.parquet`` — one row per case run
=========================  ====================  ==============================================
column                     type                  meaning
=========================  ====================  ==============================================
run_id                     string                The run; never null.
run_index                  int32                 Which of ``--runs N`` repetitions (0-based).
attempt                    int32                 1, or more when a worker died or ``--retries`` ran the case again.
case_id                    string                The case id.
name                       string                The case name.
status                     string                ``passed``, ``failed``, ``skipped``, ``error`` or ``timeout``.
mode                       string                ``single``, ``static`` or ``dynamic``; null when the case did not load.
agent                      string                The target agent's id.
tags                       list<string>          The case's tags (empty list when none).
source                     string                ``file:line`` the case came from.
total_turns                int32                 Turns taken.
duration_ms                float64               Wall time of the case.
error                      string                Why it failed, errored, timed out or was skipped, in one sentence.
awaiting_question          string                The agent's question, when the case stopped because the
                                                 agent awaited input.
hint                       string                What the user can do about it.
prompt_tokens              int64                 Prompt tokens the target agent reported over the case.
completion_tokens          int64                 Completion tokens, likewise.
total_tokens               int64                 Total tokens, likewise.
assertions_passed          int32                 Turn and final assertions that passed (checkpoints not counted).
assertions_failed          int32                 Turn and final assertions that did not pass, errored ones included.
checkpoints_reached        int32                 Dynamic-mode checkpoints reached.
checkpoints_total          int32                 Dynamic-mode checkpoints defined (0 for other modes).
started_at                 timestamp[ms, UTC]    When the case started.
worker                     string                The actor (or process) the conversation ran on.
rescorable                 bool                  ``farm rescore``: false when the case could not be rescored; null in a live run.
retried                    int32                 Earlier attempts that ended in an agent error or timeout and
                                                 that ``--retries`` ran again (their errors are in the JSONL).
role_calls                 int32                 Calls the role cache could answer made for the case.
cache_hits                 int32                 Of ``role_calls``, those the role cache answered.
schema_version             int16                 Version of the result record's shape.
=========================  ====================  ==============================================

``turns.parquet`` — one row per turn
=========================  ====================  ==============================================
column                     type                  meaning
=========================  ====================  ==============================================
run_id                     string                The run.
run_index                  int32                 As in ``cases``.
attempt                    int32                 As in ``cases``.
case_id                    string                The case id.
turn                       int32                 1-based turn number.
input                      string                What the user sent: the text itself, or JSON text when structured.
input_source               string                ``static``, ``simulated`` or ``human``.
output                     string                The agent's reply content, cut at 65536 characters.
output_chars               int64                 The reply's whole length in characters when ``output``
                                                 was cut; null when it was kept whole.
tool_calls                 list<struct<…>>       The turn's tool calls in order, each a struct of
                                                 ``id`` string (the agent's call id), ``name`` string,
                                                 ``args`` string (JSON text), ``result`` string (JSON
                                                 text: what the farm answered), ``mocked`` bool
                                                 (whether ``result`` came from a ``tool_mocks`` entry).
awaiting_input             bool                  Whether the agent awaits user input after this reply.
awaiting_reason            string                ``agent_declared``, ``tool_requires_confirmation``,
                                                 ``content_is_question``, ``tool_calls`` or ``completed``.
input_hint                 string                The hint the agent gave for the input it awaits.
duration_ms                float64               The agent's time in the turn, all its steps included,
                                                 without waits for rate-limit permits.
queued_ms                  float64               Time the turn waited for rate-limit permits.
prompt_tokens              int64                 Prompt tokens the agent reported for the turn.
completion_tokens          int64                 Completion tokens, likewise.
total_tokens               int64                 Total tokens, likewise.
steps                      int32                 Agent calls in the turn (more than one when tool mocks were answered).
retries                    int32                 Requests repeated in the turn (429, 5xx, connection errors).
note                       string                What is worth knowing that is no error ("stopped after 8 tool steps").
simulator_reasoning        string                The simulator's reasoning for a simulated input.
error                      string                What went wrong in this turn, if anything.
=========================  ====================  ==============================================

``assertions.parquet`` — one row per assertion result or checkpoint
=========================  ====================  ==============================================
column                     type                  meaning
=========================  ====================  ==============================================
run_id                     string                The run.
run_index                  int32                 As in ``cases``.
attempt                    int32                 As in ``cases``.
case_id                    string                The case id.
scope                      string                ``turn``, ``final`` or ``checkpoint``.
turn                       int32                 The turn checked; for a checkpoint the turn it was
                                                 reached at; null for ``final`` and unreached checkpoints.
checkpoint_id              string                The checkpoint's id; null unless ``scope`` is ``checkpoint``.
position                   int32                 0-based place in its list (the turn's assertions, the
                                                 final assertions, or the checkpoints).
type                       string                The assertion type, e.g. ``contains``; null for a
                                                 checkpoint that was never checked.
passed                     bool                  Whether it passed (after ``negate``); for a checkpoint,
                                                 whether it was reached.
negate                     bool                  Whether the assertion was negated.
error                      bool                  True when it could not be evaluated at all (not a plain failure).
expected                   string                What it expected, as JSON text.
actual                     string                What was found, as JSON text (truncated to a few hundred characters).
message                    string                Why it failed (or the user's ``message``); null when it passed.
score                      float64               A validator's or script's score, when it gave one.
reason                     string                A validator's or script's reason.
suggestions                list<string>          A validator's suggestions.
required                   bool                  Whether the checkpoint is required; null unless a checkpoint.
description                string                The checkpoint's description; null unless a checkpoint.
=========================  ====================  ==============================================

While a run is going, :class:`ParquetWriter` writes immutable part files to
``.parts/`` (a Parquet file whose writer dies before closing cannot be read);
``close()`` or :func:`consolidate` merges them into the three tables. Each
consolidated table records in its metadata the last part number it holds, so
a consolidation interrupted after replacing a table but before deleting the
parts never counts a part twice.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from farm.errors import UsageError
from farm.results import AssertionResult, CaseResult, CheckpointResult, Status, clip_output
from farm.writers.base import ClosingWriter

__all__ = [
    "ASSERTIONS_SCHEMA",
    "CASES_SCHEMA",
    "TURNS_SCHEMA",
    "ParquetWriter",
    "consolidate",
    "rows_from_result",
]

PARTS_DIR = ".parts"
COMPRESSION = "zstd"
#: Schema metadata key of a consolidated table: the last part number merged into it.
LAST_PART_KEY = b"farm.last_part"
#: A consolidated row group is cut at this many rows or bytes, whichever comes first.
ROW_GROUP_ROWS = 100_000
ROW_GROUP_BYTES = 64 << 20

Row = dict[str, Any]


def _list_of(item: pa.DataType) -> pa.DataType:
    # "element" is the name Parquet gives list items, so a table read back equals its schema.
    return pa.list_(pa.field("element", item))


_KEY_FIELDS = [
    ("run_id", pa.string()),
    ("run_index", pa.int32()),
    ("attempt", pa.int32()),
    ("case_id", pa.string()),
]

CASES_SCHEMA = pa.schema(
    [
        *_KEY_FIELDS,
        ("name", pa.string()),
        ("status", pa.string()),
        ("mode", pa.string()),
        ("agent", pa.string()),
        ("tags", _list_of(pa.string())),
        ("source", pa.string()),
        ("total_turns", pa.int32()),
        ("duration_ms", pa.float64()),
        ("error", pa.string()),
        ("awaiting_question", pa.string()),
        ("hint", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("assertions_passed", pa.int32()),
        ("assertions_failed", pa.int32()),
        ("checkpoints_reached", pa.int32()),
        ("checkpoints_total", pa.int32()),
        ("started_at", pa.timestamp("ms", tz="UTC")),
        ("worker", pa.string()),
        ("rescorable", pa.bool_()),
        ("retried", pa.int32()),
        ("role_calls", pa.int32()),
        ("cache_hits", pa.int32()),
        ("schema_version", pa.int16()),
    ]
)
"""Columns of ``cases.parquet`` (see the module docstring)."""

TOOL_CALL_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("args", pa.string()),
        ("result", pa.string()),
        ("mocked", pa.bool_()),
    ]
)

TURNS_SCHEMA = pa.schema(
    [
        *_KEY_FIELDS,
        ("turn", pa.int32()),
        ("input", pa.string()),
        ("input_source", pa.string()),
        ("output", pa.string()),
        ("output_chars", pa.int64()),
        ("tool_calls", _list_of(TOOL_CALL_TYPE)),
        ("awaiting_input", pa.bool_()),
        ("awaiting_reason", pa.string()),
        ("input_hint", pa.string()),
        ("duration_ms", pa.float64()),
        ("queued_ms", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("total_tokens", pa.int64()),
        ("steps", pa.int32()),
        ("retries", pa.int32()),
        ("note", pa.string()),
        ("simulator_reasoning", pa.string()),
        ("error", pa.string()),
    ]
)
"""Columns of ``turns.parquet`` (see the module docstring)."""

ASSERTIONS_SCHEMA = pa.schema(
    [
        *_KEY_FIELDS,
        ("scope", pa.string()),
        ("turn", pa.int32()),
        ("checkpoint_id", pa.string()),
        ("position", pa.int32()),
        ("type", pa.string()),
        ("passed", pa.bool_()),
        ("negate", pa.bool_()),
        ("error", pa.bool_()),
        ("expected", pa.string()),
        ("actual", pa.string()),
        ("message", pa.string()),
        ("score", pa.float64()),
        ("reason", pa.string()),
        ("suggestions", _list_of(pa.string())),
        ("required", pa.bool_()),
        ("description", pa.string()),
    ]
)
"""Columns of ``assertions.parquet`` (see the module docstring)."""

_SCHEMAS: dict[str, pa.Schema] = {
    "cases": CASES_SCHEMA,
    "turns": TURNS_SCHEMA,
    "assertions": ASSERTIONS_SCHEMA,
}
_PART_NAME = re.compile(r"^(?P<table>[a-z]+)-(?P<number>\d+)\.parquet$")


# --- rows ------------------------------------------------------------------


def rows_from_result(result: CaseResult) -> tuple[Row, list[Row], list[Row]]:
    """One result as ``(case row, turn rows, assertion rows)``, keyed to the three schemas."""
    key: Row = {
        "run_id": result.run_id,
        "run_index": result.run_index,
        "attempt": result.attempt,
        "case_id": result.id,
    }
    turn_rows: list[Row] = []
    assertion_rows: list[Row] = []
    for turn in result.turns:
        output, output_chars = clip_output(turn.output)
        if turn.output_chars is not None:  # read back from a row that was cut already
            output_chars = turn.output_chars
        turn_rows.append(
            {
                **key,
                "turn": turn.turn,
                "input": _input_text(turn.input),
                "input_source": turn.input_source,
                "output": output,
                "output_chars": output_chars,
                "tool_calls": [
                    {
                        "id": call.id,
                        "name": call.name,
                        "args": _json_text(call.args),
                        "result": _json_text(call.result),
                        "mocked": call.mocked,
                    }
                    for call in turn.tool_calls
                ],
                "awaiting_input": turn.awaiting_input,
                "awaiting_reason": turn.awaiting_reason,
                "input_hint": turn.input_hint,
                "duration_ms": turn.duration_ms,
                "queued_ms": turn.queued_ms,
                "prompt_tokens": turn.usage.prompt_tokens,
                "completion_tokens": turn.usage.completion_tokens,
                "total_tokens": turn.usage.total_tokens,
                "steps": turn.steps,
                "retries": turn.retries,
                "note": turn.note,
                "simulator_reasoning": turn.simulator_reasoning,
                "error": turn.error,
            }
        )
        for position, assertion in enumerate(turn.assertions):
            assertion_rows.append(_assertion_row(key, "turn", turn.turn, position, assertion))
    for position, assertion in enumerate(result.final_assertions):
        assertion_rows.append(_assertion_row(key, "final", None, position, assertion))
    for position, checkpoint in enumerate(result.checkpoints):
        assertion_rows.append(_checkpoint_row(key, position, checkpoint))

    scored = [a for turn in result.turns for a in turn.assertions] + list(result.final_assertions)
    passed = sum(1 for a in scored if a.passed)
    case_row: Row = {
        **key,
        "name": result.name,
        "status": Status(result.status).value,
        "mode": result.mode,
        "agent": result.agent,
        "tags": list(result.tags),
        "source": result.source,
        "total_turns": result.total_turns,
        "duration_ms": result.duration_ms,
        "error": result.error,
        "awaiting_question": result.awaiting_question,
        "hint": result.hint,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.total_tokens,
        "assertions_passed": passed,
        "assertions_failed": len(scored) - passed,
        "checkpoints_reached": sum(1 for c in result.checkpoints if c.reached),
        "checkpoints_total": len(result.checkpoints),
        "started_at": None if result.started_at is None else datetime.fromtimestamp(result.started_at, UTC),
        "worker": result.worker,
        "rescorable": result.rescorable,
        "retried": len(result.retried),
        "role_calls": result.role_calls,
        "cache_hits": result.cache_hits,
        "schema_version": result.schema_version,
    }
    return case_row, turn_rows, assertion_rows


def _assertion_row(key: Row, scope: str, turn: int | None, position: int, assertion: AssertionResult) -> Row:
    return {
        **key,
        "scope": scope,
        "turn": turn,
        "checkpoint_id": None,
        "position": position,
        "type": assertion.type,
        "passed": assertion.passed,
        "negate": assertion.negate,
        "error": assertion.error,
        "expected": _json_text(assertion.expected),
        "actual": _json_text(assertion.actual),
        "message": assertion.message,
        "score": assertion.score,
        "reason": assertion.reason,
        "suggestions": assertion.suggestions,
        "required": None,
        "description": None,
    }


def _checkpoint_row(key: Row, position: int, checkpoint: CheckpointResult) -> Row:
    assertion = checkpoint.assertion
    row = (
        _assertion_row(key, "checkpoint", None, position, assertion)
        if assertion is not None
        else {
            **key,
            **{name: None for name in ASSERTIONS_SCHEMA.names if name not in key},
            "position": position,
            "negate": False,
            "error": False,
        }
    )
    row.update(
        scope="checkpoint",
        turn=checkpoint.reached_at_turn,
        checkpoint_id=checkpoint.id,
        passed=checkpoint.reached,
        required=checkpoint.required,
        description=checkpoint.description,
    )
    return row


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def _input_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else _json_text(value)


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
        self._buffers: dict[str, list[Row]] = {table: [] for table in _SCHEMAS}
        self._oldest: float | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def write(self, result: CaseResult) -> None:
        if self._closed:
            raise ValueError(f"Cannot write a result, as the Parquet writer for {self.run_dir} has been closed.")
        case_row, turn_rows, assertion_rows = rows_from_result(result)
        self._buffers["cases"].append(case_row)
        self._buffers["turns"].extend(turn_rows)
        self._buffers["assertions"].extend(assertion_rows)
        if self._oldest is None:
            self._oldest = self._clock()
        full = max(len(rows) for rows in self._buffers.values()) >= self._rows_per_part
        if full or self._clock() - self._oldest >= self._seconds_per_part:
            self._write_part()

    def flush(self) -> None:
        """Write what is buffered as a part file (costly if called after every result)."""
        if not self._closed:
            self._write_part()

    def close(self) -> None:
        """Write the last part and consolidate the run's tables; the parts are then removed."""
        if self._closed:
            return
        self._write_part()
        self._closed = True
        consolidate(self.run_dir)

    def _write_part(self) -> None:
        if not any(self._buffers.values()):
            return
        for table, rows in self._buffers.items():
            if rows:
                part = pa.Table.from_pylist(rows, schema=_SCHEMAS[table])
                _write_atomically(part, self._parts_dir / f"{table}-{self._next_part:06d}.parquet")
        _fsync_dir(self._parts_dir)
        # Buffers are cleared only once every part is in place: a failed write is retried
        # whole, under the same part number, by the next write/flush/close.
        for rows in self._buffers.values():
            rows.clear()
        self._next_part += 1
        self._oldest = None


def _write_atomically(table: pa.Table, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as sink:
        pq.write_table(table, sink, compression=COMPRESSION)
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(tmp, path)


# --- consolidating -----------------------------------------------------------


def consolidate(run_dir: str | os.PathLike[str]) -> dict[str, int]:
    """Merge ``run_dir``'s part files into its three tables; return each table's row count.

    Rows already in a table (an earlier consolidation, a resumed run) are kept
    and come first; parts follow in the order they were written. Rows are
    streamed a row group at a time, never all held at once. Every table file
    exists afterwards, empty if it has no rows, and ``.parts/`` is gone.
    Safe to run again after it was interrupted.
    """
    run_dir = Path(run_dir)
    parts_dir = run_dir / PARTS_DIR
    parts = _parts(parts_dir)
    counts = {
        table: _consolidate_table(run_dir, table, schema, parts.get(table, []))
        for table, schema in _SCHEMAS.items()
    }
    _fsync_dir(run_dir)
    if parts_dir.is_dir():
        merged = {path for listed in parts.values() for _, path in listed}
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
    target = run_dir / f"{table}.parquet"
    merged = _last_part_in(target)
    new = [(number, path) for number, path in parts if number > merged]
    if target.exists() and not new:
        return pq.read_metadata(target).num_rows
    sources = ([target] if target.exists() else []) + [path for _, path in new]
    last = max([merged, *(number for number, _ in new)])
    tmp = run_dir / f".{target.name}.tmp"
    rows = 0
    with open(tmp, "wb") as sink:
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
        sink.flush()
        os.fsync(sink.fileno())
    os.replace(tmp, target)
    return rows


def _write_row_group(writer: pq.ParquetWriter, pending: list[pa.Table]) -> int:
    """Write ``pending`` as one row group and empty it; return its row count."""
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
    return table.select(schema.names).cast(schema)


def _parts(parts_dir: Path) -> dict[str, list[tuple[int, Path]]]:
    """Finished part files by table, in the order they were written."""
    found: dict[str, list[tuple[int, Path]]] = {}
    if not parts_dir.is_dir():
        return found
    for path in parts_dir.iterdir():
        match = _PART_NAME.match(path.name)
        if match and match["table"] in _SCHEMAS:
            found.setdefault(match["table"], []).append((int(match["number"]), path))
    for listed in found.values():
        listed.sort()
    return found


def _last_part_in(target: Path) -> int:
    """The last part number merged into a consolidated table (0 when none or no table)."""
    if not target.exists():
        return 0
    metadata = pq.read_schema(target).metadata or {}
    return int(metadata.get(LAST_PART_KEY, b"0"))


def _last_part_number(run_dir: Path) -> int:
    """The highest part number used in ``run_dir``, written out or already merged."""
    numbers = [number for listed in _parts(run_dir / PARTS_DIR).values() for number, _ in listed]
    numbers += [_last_part_in(run_dir / f"{table}.parquet") for table in _SCHEMAS]
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
