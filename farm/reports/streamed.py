"""Reports written once the run ends, with flat memory: each result's part is streamed to a
temporary file beside the target as it arrives; ``close`` writes head + parts + foot
atomically (the head can then hold the run's counts, a :class:`~farm.summary.Summary`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path

from farm.files import atomic_file
from farm.results import CaseResult
from farm.summary import Summary
from farm.writers.base import ClosingWriter

__all__ = ["StreamedReport"]


class StreamedReport(ClosingWriter, ABC):
    """A :class:`~farm.writers.ResultWriter` base: subclasses give ``render``, ``head`` and ``foot``."""

    label = "report"

    def __init__(self, path: str | os.PathLike[str], run_id: str):
        self.path = Path(path)
        self.run_id = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._parts = tempfile.NamedTemporaryFile(  # noqa: SIM115  (closed in close())
            "w+", encoding="utf-8", dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".cases", delete=False
        )
        self.summary = Summary()
        """The run's counts so far: every result written is added before it is rendered."""
        self._created = time.time()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @abstractmethod
    def render(self, result: CaseResult) -> str:
        """This result's part of the document."""

    @abstractmethod
    def head(self) -> str:
        """What comes before the parts; called at ``close``, when every count is known."""

    @abstractmethod
    def foot(self) -> str:
        """What comes after the parts."""

    def tally(self, result: CaseResult) -> None:
        """Count ``result`` (subclasses add their own figures, then call this)."""
        self.summary.add(result)

    def write(self, result: CaseResult) -> None:
        if self._closed:
            raise ValueError(f"Cannot write a result, as the {self.label} writer for {self.path} has been closed.")
        self.tally(result)
        self._parts.write(self.render(result))

    def flush(self) -> None:
        if not self._closed:
            self._parts.flush()

    def close(self) -> None:
        """Assemble the document at ``path`` (atomically) and remove the temporary file."""
        if self._closed:
            return
        self._closed = True
        try:
            self._parts.flush()
            self._parts.seek(0)
            with atomic_file(self.path) as out:
                out.write(self.head())
                shutil.copyfileobj(self._parts, out)
                out.write(self.foot())
        finally:
            self._parts.close()
            Path(self._parts.name).unlink(missing_ok=True)
