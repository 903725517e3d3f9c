"""The results folder as ``farm view`` sees it: its run folders, found by name only, and the
Parquet files of each table of a run (the consolidated table, and while the run goes, its parts).

A name from a URL is never joined onto a path as it is: it must be the name of a folder
directly inside the results folder (no separator, no leading dot), and that folder must still be
inside it once symlinks are resolved. So ``..``, ``%2e%2e``, an absolute path or a symlink out of
the folder all read as "no such run".
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from farm.writers import RUN_JSON

__all__ = ["NotFound", "ResultsFolder", "RunFolder", "read_case_rows", "read_columns", "run_info"]

_PARTS = ".parts"
_PART_NAME = re.compile(r"^(?P<table>[a-z]+)-(?P<number>\d+)\.parquet$")
_RUN_NAME = re.compile(r"^[^./\\][^/\\]*$")


class NotFound(LookupError):
    """A run or a case that the results folder does not hold; the message says which."""


@dataclass(frozen=True)
class RunFolder:
    """One run folder inside the results folder."""

    name: str
    """The folder's name: how URLs name the run."""
    path: Path

    def table_files(self, table: str) -> list[Path]:
        """The Parquet files holding ``table`` (``cases``, ``turns``, ``assertions``): the consolidated
        file, then the parts a run still going (or killed) has written so far, oldest first."""
        files = []
        whole = self.path / f"{table}.parquet"
        if whole.is_file():
            files.append(whole)
        parts = self.path / _PARTS
        if parts.is_dir():
            numbered = []
            for entry in os.scandir(parts):
                match = _PART_NAME.match(entry.name)
                if match and match["table"] == table:
                    numbered.append((int(match["number"]), Path(entry.path)))
            files.extend(path for _, path in sorted(numbered))
        return files

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """What changes when the run's files change: a cache key for anything read from them."""
        marks = []
        for name in (RUN_JSON, "cases.parquet", "results.jsonl", _PARTS):
            try:
                stat = (self.path / name).stat()
            except OSError:
                continue
            marks.append((name, stat.st_mtime_ns, stat.st_size))
        return tuple(marks)


class ResultsFolder:
    """The folder ``farm view`` serves: every subfolder holding a run is a run."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()

    def runs(self) -> list[RunFolder]:
        """Every run folder, by name. A folder is a run when it has ``run.json``, ``cases.parquet``,
        ``results.jsonl`` or ``.parts/`` (a run still going)."""
        found = []
        try:
            entries = list(os.scandir(self.root))
        except OSError:
            return []
        for entry in entries:
            if not _RUN_NAME.match(entry.name) or not entry.is_dir():
                continue
            path = Path(entry.path)
            if any((path / name).exists() for name in (RUN_JSON, "cases.parquet", "results.jsonl", _PARTS)):
                found.append(RunFolder(entry.name, path))
        return sorted(found, key=lambda run: run.name)

    def run(self, name: str) -> RunFolder:
        """The run folder called ``name``; :class:`NotFound` unless it is a run directly inside the folder."""
        if not _RUN_NAME.match(name):
            raise NotFound(f"There is no run called {name!r} in {self.root}.")
        path = (self.root / name).resolve()
        if path.parent != self.root or not path.is_dir():
            raise NotFound(f"There is no run called {name!r} in {self.root}.")
        return RunFolder(name, path)


def read_columns(files: list[Path], schema: pa.Schema, columns: list[str], filters: object = None) -> pa.Table:
    """``columns`` of ``files`` as one table with ``schema``'s types. A column a file lacks (written by
    an older farm) reads as nulls; a file that vanished meanwhile (a part merged by consolidation)
    is passed over: the caller reads again when the run's signature has changed."""
    tables = []
    for path in files:
        try:
            present = set(pq.read_schema(path).names)
            table = pq.read_table(path, columns=[name for name in columns if name in present], filters=filters)
        except FileNotFoundError:
            continue
        for name in columns:
            if name not in present:
                table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
        tables.append(table.select(columns).cast(pa.schema([schema.field(name) for name in columns])))
    if not tables:
        return pa.schema([schema.field(name) for name in columns]).empty_table()
    return pa.concat_tables(tables)


def read_case_rows(files: list[Path], schema: pa.Schema, case_id: str) -> pa.Table:
    """Every column of the rows of ``files`` whose ``case_id`` is ``case_id``, with ``schema``'s types.

    The ``case_id`` column is read first, and then only the row groups that hold the case: a case
    of a large run costs one row group, not the whole table."""
    tables = []
    for path in files:
        try:
            parquet = pq.ParquetFile(path)
        except FileNotFoundError:
            continue
        present = set(parquet.schema_arrow.names)
        columns = [name for name in schema.names if name in present]
        for group in range(parquet.num_row_groups):
            if not pc.any(pc.equal(parquet.read_row_group(group, columns=["case_id"])["case_id"], case_id)).as_py():
                continue
            # a batch at a time: a row group of a large run holds up to 64 MB of turns
            for batch in parquet.iter_batches(batch_size=8192, row_groups=[group], columns=columns):
                rows = pa.Table.from_batches([batch])
                rows = rows.filter(pc.equal(rows["case_id"], case_id))
                if rows.num_rows == 0:
                    continue
                for name in schema.names:
                    if name not in present:
                        rows = rows.append_column(name, pa.nulls(rows.num_rows, schema.field(name).type))
                tables.append(rows.select(schema.names).cast(schema))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def run_info(path: Path) -> dict[str, Any]:
    """The run folder's ``run.json`` as it is (every field may be missing); empty when there is none
    or it cannot be read (a run just starting, a file another tool wrote)."""
    try:
        info = json.loads((path / RUN_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}
