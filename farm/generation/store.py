"""``<run_dir>/generated.jsonl``: every case a generation accepted, as the generator gave it,
one line each, written before the case runs. It is a valid suite: ``--resume`` reads it back
(and generates only what is missing), and a generation that ran to its end is kept whole in
the role cache from it (:mod:`farm.generation.cache`)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

from farm.results._folder import GENERATED_JSONL  # the reader knows a run folder's files
from farm.suite.loader import load_text

if TYPE_CHECKING:
    from farm.loaded import LoadedCase

__all__ = ["GENERATED_JSONL", "GeneratedFile"]


class GeneratedFile:
    """The ``generated.jsonl`` of one generation; without :meth:`open` (a dry run), a temporary
    file holds the lines, for the cache entry."""

    def __init__(self) -> None:
        self._file: IO[str] | None = None
        self._path: Path | None = None

    def open(self, run_dir: Path, origin: str, base_dir: str) -> list[LoadedCase]:
        """Start (or continue) ``run_dir/generated.jsonl``; returns the cases already there (a
        resumed run's), named by their generator ``origin`` as when they were generated, so that a
        case keeps its suite (:func:`~farm.results._suites.suite_of`) on a resume."""
        path = Path(run_dir) / GENERATED_JSONL
        path.parent.mkdir(parents=True, exist_ok=True)
        resumed: list[LoadedCase] = []
        if path.exists():
            text = path.read_text(encoding="utf-8")
            whole = text[: text.rfind("\n") + 1]  # a line torn by a crash was never accepted
            if whole != text:
                with open(path, "r+", encoding="utf-8") as file:
                    file.truncate(len(whole.encode("utf-8")))
            resumed = [c for c in load_text(whole, f"{origin} {GENERATED_JSONL}", base_dir, compact=True).cases if c.ok]
        self._path = path
        self._file = open(path, "a", encoding="utf-8")
        return resumed

    def write(self, accepted: list[LoadedCase]) -> None:
        """Append ``accepted``, each case as given."""
        if self._file is None:
            self._file = tempfile.TemporaryFile("w+", encoding="utf-8")  # a dry run: the cache entry's source
        for loaded in accepted:
            assert loaded.case is not None
            self._file.write(json.dumps(loaded.case.model_dump(mode="json", exclude_unset=True), ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def lines(self) -> str | None:
        """Every line written (the file closed first), or None when nothing was ever opened or
        written; raises :class:`OSError` when the file cannot be read."""
        if self._file is None and self._path is None:
            return None
        if self._path is not None:
            self.close()
            return self._path.read_text(encoding="utf-8")
        assert self._file is not None
        self._file.seek(0)
        return self._file.read()
