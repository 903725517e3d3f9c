"""The reader of run folders: one typed :class:`RunRecord` per run, whatever state its files are in.

A run is a folder (its layout is :mod:`farm.results._folder`'s: ``run.json``, ``results.jsonl``,
the Parquet tables, and while it goes, their parts), or a single results file (a JSONL file, or a
Parquet cases table). The reader reads that layout, so nothing else does:
a record's tables are the consolidated files and the parts, or, for a run with no Parquet, its
JSONL. Every row carries :data:`~farm.results.CASE_RUN_KEY`, and the cases table can give each case
run's ``suite``: the reader works it out from the case's ``source`` and the run's ``run.json``
(:mod:`farm.results._suites`), so that every comparison pairs a case by the same
:data:`~farm.results.CASE_KEY`.

A corrupt run never raises: a ``run.json`` field of the wrong type or a NaN reads as unknown,
an unreadable file is passed over, and each says so in :attr:`RunRecord.problems`. A folder
given with a ``root`` (:func:`list_runs`) reads no file that leads out of that root.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from farm.errors import UsageError
from farm.results._folder import (
    CASE_RUN_KEY,
    LAST_PART_KEY,
    MARKS,
    PARTS_DIR,
    RESULTS_JSONL,
    RUN_JSON,
    parts,
    table_of,
    table_path,
)
from farm.results._records import CaseResult
from farm.results._suites import LINE, Suites, suite_of
from farm.writers import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    SPANS_SCHEMA,
    TURNS_SCHEMA,
    RunInfo,
    read_jsonl_results,
    rows_from_result,
)

__all__ = ["SUITE", "TABLES", "RunRecord", "list_runs", "read_run"]

TABLES: dict[str, pa.Schema] = {
    "cases": CASES_SCHEMA,
    "turns": TURNS_SCHEMA,
    "assertions": ASSERTIONS_SCHEMA,
    "spans": SPANS_SCHEMA,
}
"""The tables of a run, with the columns (and types) they are read with."""

SUITE = "suite"
"""The column of every table that names a case run's suite. The files hold the suite as the run
named it (:func:`~farm.results._suites.suite_of`); the reader gives it as :meth:`RunRecord.suite_of`
reads it, so that it pairs cases across runs. A run written before schema 7 has no suite in its
files: the cases table's comes from each ``source``, the other tables' from the case of their id
(such a run refused an id repeated across its suites)."""

RUN_NAME = re.compile(r"^[^./\\][^/\\]*$")
_KEY_COLUMNS = {name for name in CASE_RUN_KEY if name not in ("agent", SUITE)}
_REQUIRED = {"cases": _KEY_COLUMNS | {"status"}, "turns": _KEY_COLUMNS, "assertions": _KEY_COLUMNS, "spans": _KEY_COLUMNS}
"""Columns a table must have to be read at all (a farm that wrote no ``agent`` tested one agent)."""

_EXPECTED = {
    "float": "a number", "int": "a whole number", "string": "text", "bool": "true or false",
    "list": "a list", "dict": "an object", "literal": "one of the known values", "model": "an object",
}  # fmt: skip
"""What a ``run.json`` field should have been, by the kind of check it failed."""


class RunRecord:
    """One run as its files hold it. Its ``run.json`` and tables are read when first asked for,
    and what could not be read is in :attr:`problems`, one sentence each."""

    def __init__(self, path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None):
        self.path = Path(path)
        """The run folder, or the results file."""
        self.root = Path(root).resolve() if root is not None else None
        """When set, no file is read whose real path is outside it (a symlink out of the results folder)."""
        self._problems: list[str] = []
        self._status_known = False
        self._from_jsonl: dict[str, pa.Table] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RunRecord({str(self.path)!r})"

    @property
    def name(self) -> str:
        """The folder's (or file's) name: how ``farm view`` names the run."""
        return self.path.name

    @property
    def is_folder(self) -> bool:
        return self.path.is_dir()

    @cached_property
    def info(self) -> RunInfo:
        """``run.json``, typed: a field that is missing, of the wrong type or not a finite number
        reads as its default (each but the missing ones listed in :attr:`problems`)."""
        data = self._run_json()
        info, problems = _typed_info(data, self.path / RUN_JSON)
        self._add(problems)
        self._status_known = data is not None and "status" in info.model_fields_set
        return info

    @property
    def run_id(self) -> str:
        """``run.json``'s run id, else the folder's name (a results file: its first row's run id)."""
        if self.info.run_id:
            return self.info.run_id
        if not self.is_folder:
            ids = self.cases(columns=["run_id"])["run_id"]
            return str(ids[0].as_py()) if len(ids) else self.path.stem
        return self.name

    @property
    def problems(self) -> list[str]:
        """What is wrong with this run, one sentence each: what was read so far (``run.json`` always)."""
        self.info  # noqa: B018  (reads run.json)
        with self._lock:
            return list(self._problems)

    @property
    def status(self) -> str:
        """``run.json``'s status; without one, ``finished`` when the tables are consolidated, else ``running``."""
        info = self.info
        if self._status_known:
            return info.status
        return "finished" if self.finished_tables else "running"

    @property
    def has_info(self) -> bool:
        """Whether the run has a ``run.json`` (a results file, or a run of another tool, may have none)."""
        return self.is_folder and self._inside(self.path / RUN_JSON) and (self.path / RUN_JSON).is_file()

    @property
    def finished_tables(self) -> bool:
        """Whether the consolidated ``cases.parquet`` is there (not only parts, or only JSONL)."""
        return not self.is_folder or table_path(self.path, "cases").is_file()

    @property
    def unconsolidated(self) -> bool:
        """Whether the run has parts its tables do not hold yet: it is still going, or was killed
        before consolidating (``farm test --resume`` finishes it)."""
        return self.is_folder and (self.path / PARTS_DIR).is_dir()

    @property
    def jsonl(self) -> Path | None:
        """The run's results JSONL: the folder's, else the one ``run.json`` names (``-o``); None when there is none."""
        if not self.is_folder:
            return self.path if self.path.suffix.lower() in (".jsonl", ".ndjson") else None
        own = self.path / RESULTS_JSONL
        if own.is_file() and self._inside(own):
            return own
        named = Path(self.info.results) if self.info.results else None
        return named if named is not None and named.is_file() and self._inside(named) else None

    def connector_of(self, agent: str) -> str | None:
        """The connector that served ``agent`` in this run: ``run.json``'s ``connectors`` (one per agent),
        else its ``connector`` for its first agent, else the agent's in the recorded configuration."""
        info = self.info
        if info.connectors.get(agent):
            return info.connectors[agent]
        if agent == info.agent and info.connector:
            return info.connector
        configured = (info.config.get("agents") or {}).get(agent) if isinstance(info.config.get("agents"), dict) else None
        connector = configured.get("connector") if isinstance(configured, dict) else None
        return connector if isinstance(connector, str) else None

    @cached_property
    def suites(self) -> Suites:
        """Which suite each of the run's cases came from (:meth:`suite_of`)."""
        return Suites(self.info, self._input_of)

    def suite_of(self, source: str | None) -> str:
        """The suite of this run's case whose ``source`` is ``source``: what, with the case id, names
        the case in every comparison of runs (:data:`~farm.results.CASE_KEY`)."""
        return self.suites.of(source)

    def _input_of(self, folder: str) -> str | None:
        """The ``-i`` input of the run in ``folder`` (this one, or one it rescored), when its ``run.json`` says."""
        path = Path(folder)
        if self.is_folder and os.path.normpath(path) == os.path.normpath(self.path.absolute()):
            return self.info.input
        if not self._inside(path / RUN_JSON):
            return None
        other = RunRecord(path, root=self.root)
        return other.info.input if other.has_info else None

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """What changes when the run's files change: a cache key for anything read from them."""
        marks = []
        for name in MARKS if self.is_folder else ("",):
            try:
                stat = (self.path / name if name else self.path).stat()
            except OSError:
                continue
            marks.append((name, stat.st_mtime_ns, stat.st_size))
        return tuple(marks)

    # --- tables ---------------------------------------------------------------

    def table_files(self, table: str) -> list[Path]:
        """The Parquet files holding ``table`` (``cases``, ``turns``, ``assertions``): the consolidated
        file, then the parts a run still going (or killed) has written so far, oldest first."""
        if not self.is_folder:
            return [self.path] if table == "cases" and self.path.suffix.lower() == ".parquet" else []
        whole = table_path(self.path, table)
        files = [whole] if whole.is_file() else []
        numbered = parts(self.path).get(table, [])
        merged = _last_part_in(whole) if files and numbered else 0
        files.extend(path for number, path in numbered if number > merged)
        return [path for path in files if self._inside(path)]

    def cases(self, columns: Sequence[str] | None = None, filters: Any = None) -> pa.Table:
        """The cases table: one row per case run (``columns`` only, rows matching ``filters``, a
        :mod:`pyarrow.compute` expression). Its ``suite`` is each case run's suite as :data:`SUITE`
        says (:meth:`suite_of`; a rescore's case, the suite of the case it judged again)."""
        return self._suited("cases", columns, filters)

    def _suited(self, table: str, columns: Sequence[str] | None, filters: Any) -> pa.Table:
        """``table``'s ``columns``, its ``suite`` as the reader gives it (:data:`SUITE`)."""
        names = list(columns) if columns is not None else TABLES[table].names
        if SUITE not in names:
            return self._table(table, names, filters)
        needed = ("source", "case_id") if table == "cases" else ("case_id",)
        read = self._table(table, [*names, *(name for name in needed if name not in names)], filters)
        return read.set_column(read.schema.get_field_index(SUITE), SUITE, self._suites(table, read)).select(names)

    def _suites(self, table: str, read: pa.Table) -> pa.Array:
        """The suite of each row of ``read`` (with ``suite`` and ``case_id``; the cases table's with ``source``)."""
        named = _whole(read[SUITE])
        if named.null_count:  # written before schema 7
            older = self._suite_of_sources(read["source"]) if table == "cases" else self._suites_by_id(read["case_id"])
            named = pc.if_else(pc.is_null(named), older, named)
        return self._rescored_suites(read["case_id"], self._suite_column(named))

    def _suite_of_sources(self, sources: pa.ChunkedArray) -> pa.Array:
        """Each source without its line: the suite the run named (:func:`~farm.results._suites.suite_of`)."""
        where = pc.replace_substring_regex(pc.fill_null(sources, ""), pattern=LINE.pattern, replacement="")
        files = pc.unique(where)
        named = pa.array([suite_of(file) for file in files.to_pylist()], pa.string())
        return pc.take(named, _whole(pc.index_in(where, value_set=files)))

    def _suites_by_id(self, case_ids: pa.ChunkedArray) -> pa.Array:
        """The suite each case id's case run has in the cases table (a run before schema 7: its ids were unique)."""
        cases = self._table("cases", ["case_id", "source"], None)
        found = pc.index_in(case_ids, value_set=cases["case_id"])
        return pc.take(self._suite_of_sources(cases["source"]), _whole(found))

    def _suite_column(self, named: pa.ChunkedArray | pa.Array) -> pa.Array:
        """The suite of each suite as the run named it, each worked out once: a run has a few suites and many rows."""
        where = _whole(pc.fill_null(named, ""))
        files = pc.unique(where)
        suites = pa.array([self.suite_of(file) for file in files.to_pylist()], pa.string())
        return pc.take(suites, pc.index_in(where, value_set=files))

    def _rescored_suites(self, case_ids: pa.ChunkedArray, suites: pa.Array) -> pa.Array:
        """``suites``, where this run is a ``farm rescore`` of another, with each case the source run
        had the suite it had there. A rescore judges the recorded conversation of that very case again
        (an edited copy of the suite under another name included): it is the same case, and
        ``farm report OLD NEW`` pairs it so. A case is the source run's case of its suite and id, else
        the one case of its id there (the id in one suite only)."""
        rescored = (self.info.rescored_from or {}).get("run_dir")
        if (
            not rescored
            or not self._inside(Path(rescored))
            or not Path(rescored).is_dir()
            or Path(rescored).resolve() == self.path.resolve()
        ):
            return suites
        before = RunRecord(rescored, root=self.root).cases(columns=["case_id", SUITE])
        if before.num_rows == 0:
            return suites
        pairs = set(zip(before[SUITE].to_pylist(), before["case_id"].to_pylist(), strict=True))
        alone: dict[str, str | None] = {}
        for suite, case_id in pairs:
            alone[case_id] = suite if case_id not in alone else None
        ids, own = _whole(case_ids).to_pylist(), _whole(suites).to_pylist()
        return pa.array(
            [
                suite if (suite, case_id) in pairs else alone.get(case_id) or suite
                for suite, case_id in zip(own, ids, strict=True)
            ],
            pa.string(),
        )

    def turns(self, columns: Sequence[str] | None = None, filters: Any = None) -> pa.Table:
        """The turns table: one row per turn."""
        return self._suited("turns", columns, filters)

    def assertions(self, columns: Sequence[str] | None = None, filters: Any = None) -> pa.Table:
        """The assertions table: one row per assertion result or checkpoint."""
        return self._suited("assertions", columns, filters)

    def spans(self, columns: Sequence[str] | None = None, filters: Any = None) -> pa.Table:
        """The spans table: one row per span an agent made (empty for a run that captured none;
        docs/traces.md)."""
        return self._suited("spans", columns, filters)

    def case_rows(self, table: str, case_id: str, agent: str | None = None, suite: str | None = None) -> pa.Table:
        """Every column of ``table``'s rows of the case ``case_id`` (of ``agent`` and of ``suite``, as
        the reader gives it, only, when given), its ``suite`` as :data:`SUITE` says.

        The ``case_id`` column is read first, and then only the row groups that hold the case: a
        case of a large run costs one row group, not the whole table."""
        schema = TABLES[table]
        wanted = pc.field("case_id") == case_id
        if agent is not None:
            wanted = wanted & (pc.field("agent") == agent)
        if not self._parquet():
            rows = self._jsonl_tables()[table].filter(wanted)
        else:
            tables = list(
                self._each_file(
                    self.table_files(table), lambda path: _case_row_groups(path, schema, _REQUIRED[table], case_id, wanted)
                )
            )
            rows = pa.concat_tables(tables) if tables else schema.empty_table()
        rows = rows.set_column(rows.schema.get_field_index(SUITE), SUITE, self._suites(table, rows))
        return rows.filter(pc.equal(rows[SUITE], suite)) if suite is not None else rows

    def batches(self, table: str, columns: Sequence[str], batch_size: int = 16384) -> Iterator[pa.Table]:
        """``table``'s ``columns`` a batch of rows at a time, so that a scan of a large run (a text
        search over every reply) never holds the whole table."""
        names = list(columns)
        if SUITE in names:  # its suite as the reader gives it (SUITE): what the other tables' rows say
            names += [name for name in (("source", "case_id") if table == "cases" else ("case_id",)) if name not in names]
        if not self._parquet():
            yield self._with_suites(table, self._jsonl_tables()[table].select(names), columns)
            return
        schema = pa.schema([TABLES[table].field(name) for name in names])

        def read(path: Path) -> Iterator[pa.Table]:
            parquet = pq.ParquetFile(path)
            present = _fitting(path, set(parquet.schema_arrow.names), _REQUIRED[table])
            for batch in parquet.iter_batches(columns=[name for name in names if name in present], batch_size=batch_size):
                yield self._with_suites(table, _conformed(pa.Table.from_batches([batch]), schema, present, path), columns)

        yield from self._each_file(self.table_files(table), read)

    def _with_suites(self, table: str, read: pa.Table, columns: Sequence[str]) -> pa.Table:
        if SUITE in columns:
            read = read.set_column(read.schema.get_field_index(SUITE), SUITE, self._suites(table, read))
        return read.select(list(columns))

    def _table(self, table: str, columns: Sequence[str] | None, filters: Any) -> pa.Table:
        schema = TABLES[table]
        names = list(columns) if columns is not None else schema.names
        unknown = [name for name in names if name not in schema.names]
        if unknown:
            raise ValueError(f"The {table} table has no columns {', '.join(unknown)}.")
        projected = pa.schema([schema.field(name) for name in names])
        files = self.table_files(table)  # listed once: the cases table's files also say where to read from
        parquet = (bool(files) or self.jsonl is None) if table == "cases" else self._parquet()
        if not parquet:
            whole = self._jsonl_tables()[table]
            return (whole.filter(filters) if filters is not None else whole).select(names)
        tables = list(self._each_file(files, lambda path: [_read_file(path, projected, _REQUIRED[table], filters)]))
        return pa.concat_tables(tables) if tables else projected.empty_table()

    def _each_file(self, files: Sequence[Path], read: Callable[[Path], Iterable[pa.Table]]) -> Iterator[pa.Table]:
        """What ``read`` gives of each of a table's ``files``. A damaged or ill-fitting file is one of
        this run's problems and is passed over; a part merged meanwhile (gone) is skipped: the run's
        signature has changed, and its reader reads again."""
        for path in files:
            try:
                yield from read(path)
            except FileNotFoundError:
                continue
            except _Unfit as exc:
                self._add([str(exc)])
            except _DAMAGED as exc:
                self._add([_unreadable(path, exc)])

    def _parquet(self) -> bool:
        """Whether the tables are read from Parquet (else from the JSONL)."""
        return bool(self.table_files("cases")) or (self.jsonl is None)

    def _jsonl_tables(self) -> dict[str, pa.Table]:
        """The three tables made from the JSONL (kept: a results file is read once)."""
        with self._lock:
            kept = self._from_jsonl
        if kept is not None:
            return kept
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
        problems: list[str] = []
        for result in self._results(problems):
            case_row, turn_rows, assertion_rows, span_rows = rows_from_result(result)
            rows["cases"].append(case_row)
            rows["turns"].extend(turn_rows)
            rows["assertions"].extend(assertion_rows)
            rows["spans"].extend(span_rows)
        self._add(problems)
        tables = {name: pa.Table.from_pylist(rows[name], schema=schema) for name, schema in TABLES.items()}
        with self._lock:
            self._from_jsonl = tables
        return tables

    # --- records --------------------------------------------------------------

    def results(self) -> Iterator[CaseResult]:
        """The run's case results as its JSONL holds them (the conversations ``farm rescore`` replays);
        a line that is not a case result is passed over and listed in :attr:`problems`."""
        problems: list[str] = []
        yield from self._results(problems)
        self._add(problems)

    def _results(self, problems: list[str]) -> Iterator[CaseResult]:
        path = self.jsonl
        if path is None:
            return
        try:
            records = read_jsonl_results(path)
        except (UsageError, OSError) as exc:
            problems.append(str(exc))
            return
        for number, record in enumerate(records, 1):
            try:
                yield CaseResult.model_validate(record)
            except ValidationError as exc:
                problems.append(f"Result {number} of {path} is not a case result ({_where(exc)}); it was passed over.")

    def results_after(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """The result lines the JSONL gained after byte ``offset``, as dicts (a line still being
        written waits for its newline; a line that is no JSON object is passed over), and the offset
        to read on from. A file shorter than ``offset`` was rewritten: it is read from its start.
        For a page that polls a run still going: each look costs only the new lines."""
        path = self.jsonl
        if path is None:
            return [], 0
        try:
            with open(path, "rb") as file:
                if file.seek(0, 2) < offset:
                    offset = 0
                file.seek(offset)
                data = file.read()
        except OSError:
            return [], offset
        end = data.rfind(b"\n") + 1
        records = []
        for line in data[:end].splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(_finite(record, path, "", []))
        return records, offset + end

    # --- helpers --------------------------------------------------------------

    def _run_json(self) -> dict[str, Any] | None:
        if not self.has_info:
            return None
        path = self.path / RUN_JSON
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            self._add([f"{path} cannot be read ({exc}); the run's start, status and command are unknown."])
            return None
        if not isinstance(data, dict):
            self._add(
                [f"{path} holds a JSON {type(data).__name__}, not an object; the run's start, status and command are unknown."]
            )
            return None
        return data

    def _inside(self, path: Path) -> bool:
        return self.root is None or _resolves_inside(path, self.root)

    def _add(self, problems: list[str]) -> None:
        with self._lock:
            self._problems.extend(problem for problem in problems if problem not in self._problems)


_DAMAGED = (OSError, pa.ArrowInvalid)
"""What reading a damaged or truncated Parquet file raises (any other error is the farm's own, and raised)."""


class _Unfit(ValueError):
    """A Parquet file that lacks the key columns every table has, or holds columns of other types: not a table of this farm."""


def read_run(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> RunRecord:
    """The run in ``path``: a run folder (also one still going), a results JSONL file, or a Parquet
    cases table. Nothing is read yet; what cannot be read shows in the record's ``problems``.
    With ``root``, a path (or a file of the run) that leads out of ``root`` is not read.

    Raises :class:`~farm.errors.UsageError` when ``path`` does not exist, leads out of ``root``, or is
    no run at all."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"Cannot read the run {path}, as it does not exist.")
    if root is not None and not _resolves_inside(path, Path(root).resolve()):
        raise UsageError(f"Cannot read the run {path}, as it leads out of {root}.")
    if path.is_file():
        if table_of(path) is not None and table_path(path.parent, "cases").is_file():
            return RunRecord(path.parent, root=root)  # a table of a run folder: the run
        if path.suffix.lower() not in (".jsonl", ".ndjson", ".parquet"):
            raise UsageError(f"Cannot read the run {path}, as it is neither a run folder nor a .parquet or .jsonl file.")
        return RunRecord(path, root=root)
    if not _is_run_folder(path, Path(root).resolve() if root is not None else None):
        raise UsageError(f"Cannot read the run {path}, as it holds no run.json, results or tables.")
    return RunRecord(path, root=root)


def list_runs(results_dir: str | os.PathLike[str]) -> list[RunRecord]:
    """Every run folder directly inside ``results_dir``, by name. Hidden folders (``.cache``) are no
    runs, and neither is a link whose target is outside ``results_dir``; an empty list when the
    folder does not exist."""
    root = Path(results_dir).resolve()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = []
    for entry in entries:
        path = Path(entry.path)
        if RUN_NAME.match(entry.name) and _resolves_inside(path, root) and path.is_dir() and _is_run_folder(path, root):
            found.append(RunRecord(path, root=root))
    return sorted(found, key=lambda run: run.name)


def runs_at(path: str | os.PathLike[str]) -> tuple[list[RunRecord], bool]:
    """What a folder given to ``farm report`` or ``farm view`` holds: the run it is (``True``: one
    run's folder), else the runs directly inside it, a results folder (``False``; none: it is no
    results folder, as ``suites/`` is not)."""
    try:
        return [read_run(path)], True
    except UsageError:  # not a run itself: a results folder holding runs
        return list_runs(path), False


def _is_run_folder(path: Path, root: Path | None = None) -> bool:
    """Whether ``path`` holds a run: its ``run.json``, results, tables or parts (inside ``root``, when given)."""
    return any((path / name).exists() and (root is None or _resolves_inside(path / name, root)) for name in MARKS)


def _resolves_inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a loop of links
        return False


def _last_part_in(table: Path) -> int:
    """The last part number a consolidated table holds (its parts may still be there, if consolidation
    was cut short before removing them: they are not read twice); 0 when it cannot say."""
    try:
        metadata = pq.read_schema(table).metadata or {}
        return int(metadata.get(LAST_PART_KEY, b"0"))
    except (*_DAMAGED, ValueError):
        return 0


def _read_file(path: Path, schema: pa.Schema, required: set[str], filters: Any) -> pa.Table:
    """``schema``'s columns of one Parquet file."""
    present = _fitting(path, set(pq.read_schema(path).names), required)
    table = pq.read_table(path, columns=[name for name in schema.names if name in present], filters=filters)
    return _conformed(table, schema, present, path)


def _fitting(path: Path, present: set[str], required: set[str]) -> set[str]:
    """``present`` (a file's columns), when they include every ``required`` one; else :class:`_Unfit`."""
    missing = sorted(required - present)
    if missing:
        raise _Unfit(f"{path} lacks the columns {', '.join(missing)} and was passed over; it was not written by this farm.")
    return present


def _conformed(table: pa.Table, schema: pa.Schema, present: set[str], path: Path) -> pa.Table:
    """``table`` with ``schema``'s columns and types: a column its file lacks (written by an older farm) reads as nulls."""
    for name in schema.names:
        if name not in present:
            table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
    try:
        return table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        reason = str(exc).splitlines()[0]
        raise _Unfit(f"{path} has columns of other types than this farm writes ({reason}) and was passed over.") from None


def _whole(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """``column`` as one array."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _case_row_groups(path: Path, schema: pa.Schema, required: set[str], case_id: str, wanted: Any) -> list[pa.Table]:
    parquet = pq.ParquetFile(path)
    present = _fitting(path, set(parquet.schema_arrow.names), required)
    columns = [name for name in schema.names if name in present]
    found = []
    for group in range(parquet.num_row_groups):
        if not pc.any(pc.equal(parquet.read_row_group(group, columns=["case_id"])["case_id"], case_id)).as_py():
            continue
        # a batch at a time: a row group of a large run holds up to 64 MB of turns
        for batch in parquet.iter_batches(batch_size=8192, row_groups=[group], columns=columns):
            rows = _conformed(pa.Table.from_batches([batch]), schema, present, path).filter(wanted)
            if rows.num_rows:
                found.append(rows)
    return found


def _unreadable(path: Path, exc: BaseException) -> str:
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{path} cannot be read ({reason}); its rows are left out."


# --- run.json ---------------------------------------------------------------------


def _typed_info(data: dict[str, Any] | None, path: Path) -> tuple[RunInfo, list[str]]:
    """``data`` as a :class:`RunInfo`: each field that does not fit is dropped (read as its default)
    and named in the problems, as is each number that is not finite."""
    if data is None:
        return RunInfo(), []
    problems: list[str] = []
    dropped = {key for key, value in data.items() if isinstance(value, float) and not math.isfinite(value)}
    data = {key: value for key, value in _finite(data, path, "", problems).items() if key not in dropped}
    for _ in range(len(data) + 1):
        try:
            return RunInfo.model_validate(data), problems
        except ValidationError as exc:
            first: dict[str, tuple[tuple[Any, ...], str]] = {}
            for error in exc.errors():
                if error["loc"]:
                    first.setdefault(str(error["loc"][0]), (tuple(error["loc"]), error["type"]))
            for field, (loc, kind) in first.items():
                problems.append(
                    f"{path}: {_path(loc)} is {_kind(_at(data, loc))}, not {_expected(kind)}; {field} reads as unknown."
                )
            data = {key: value for key, value in data.items() if key not in first}
            if not first:
                break
    return RunInfo(), [*problems, f"{path} is not a run's record; the run's start, status and command are unknown."]


def _finite(value: Any, path: Path, where: str, problems: list[str]) -> Any:
    """``value`` with each NaN or infinite number (which JSON cannot hold, but Python writes) made None."""
    if isinstance(value, float) and not math.isfinite(value):
        problems.append(f"{path}: {where} is {value}, not a number; it reads as unknown.")
        return None
    if isinstance(value, dict):
        return {key: _finite(item, path, f"{where}.{key}" if where else str(key), problems) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item, path, f"{where}[{index}]", problems) for index, item in enumerate(value)]
    return value


def _expected(kind: str) -> str:
    for prefix, wanted in _EXPECTED.items():
        if kind.startswith(prefix):
            return wanted
    return "a value of the right kind"


def _kind(value: Any) -> str:
    """What a JSON value is, in words (the value itself is not shown: it may be anything)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def _path(loc: tuple[Any, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


def _at(data: Any, loc: tuple[Any, ...]) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return data
    return data


def _where(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return ".".join(str(part) for part in error["loc"]) or "the record"
