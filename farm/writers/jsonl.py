"""JSONL results: one :class:`~farm.results.CaseResult` per line, written as each case finishes.

Each line is handed to the operating system as soon as it is written, so a
crashed driver loses no finished case; ``os.fsync`` runs every
``fsync_lines`` lines or ``fsync_seconds`` seconds and on close, which bounds
what a lost *machine* can take with it. A crash mid-write can leave a torn
last line: the readers here skip it, and a writer opened with ``append=True``
cuts it off before adding lines (that case was not finished, so a resume runs
it again).
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.files import atomic_file
from farm.results._folder import result_lines
from farm.results._records import CaseResult
from farm.writers.base import ClosingWriter

__all__ = ["BROKEN", "JSONLWriter", "drop_broken", "read_jsonl_results", "result_lines"]


class JSONLWriter(ClosingWriter):
    """Appends each result to ``path`` as one JSON line and flushes it at once.

    ``append=False`` starts the file afresh; ``append=True`` keeps what is
    there (for a resume). Parent folders are created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        append: bool = False,
        *,
        fsync_lines: int = 1000,
        fsync_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if append and self.path.exists():
            _end_cleanly(self.path)
        self._file = open(self.path, "ab" if append else "wb")  # noqa: SIM115  (closed in close())
        self._fsync_lines = fsync_lines
        self._fsync_seconds = fsync_seconds
        self._clock = clock
        self._unsynced = 0
        self._synced_at = clock()

    @property
    def closed(self) -> bool:
        return self._file.closed

    def write(self, result: CaseResult) -> None:
        if self._file.closed:
            raise ValueError(f"Cannot write a result, as the JSONL writer for {self.path} has been closed.")
        self._file.write(result.to_json_line().encode("utf-8") + b"\n")
        self._file.flush()
        self._unsynced += 1
        if self._unsynced >= self._fsync_lines or self._clock() - self._synced_at >= self._fsync_seconds:
            self._sync()

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._sync()

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self.flush()
        finally:
            self._file.close()

    def _sync(self) -> None:
        os.fsync(self._file.fileno())
        self._unsynced = 0
        self._synced_at = self._clock()


def read_jsonl_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every result line in ``path`` as a dict, skipping a torn last line.

    An undecodable line anywhere else is damage, not a crash, and raises
    :class:`~farm.errors.UsageError` naming the line.
    """
    return [record for _, record in result_lines(Path(path))]


BROKEN = ("error", "timeout")
"""Statuses ``--retry-errors`` runs again."""


def drop_broken(path: str | os.PathLike[str]) -> int:
    """Remove from ``path`` the results that ended in ``error`` or ``timeout`` (``--retry-errors``:
    a resume runs them again, and their new results replace them); return how many went.

    The file is rewritten whole (a reader sees the old one or the new one), the other lines as
    they were; a torn last line goes too, as a resume's append would cut it.
    """
    path = Path(path)
    lines = list(io.BytesIO(path.read_bytes()))  # read once: parsed, then written back as they were
    keep = {number for number, record in result_lines(path, lines) if record.get("status") not in BROKEN}
    dropped = 0
    with atomic_file(path, "wb") as out:
        for number, raw in enumerate(lines, 1):
            if number in keep:
                out.write(raw if raw.endswith(b"\n") else raw + b"\n")
            elif raw.strip():
                dropped += 1
    return dropped


def _end_cleanly(path: Path) -> None:
    """Make ``path`` end with a newline, so appended lines start on a line of their own.

    A last line without its newline is kept (newline added) when it decodes as
    a JSON object, and cut off when it is torn.
    """
    with open(path, "rb+") as file:
        size = file.seek(0, os.SEEK_END)
        if size == 0:
            return
        file.seek(size - 1)
        if file.read(1) == b"\n":
            return
        start = _after_last_newline(file, size)
        file.seek(start)
        tail = file.read()
        try:
            whole = isinstance(json.loads(tail), dict)
        except ValueError:
            whole = False
        if whole:
            file.seek(size)
            file.write(b"\n")
        else:
            file.truncate(start)
        file.flush()
        os.fsync(file.fileno())


def _after_last_newline(file: Any, size: int, chunk: int = 1 << 16) -> int:
    """Offset just past the last ``\\n`` in the first ``size`` bytes of ``file`` (0 when none)."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        file.seek(start)
        found = file.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0
