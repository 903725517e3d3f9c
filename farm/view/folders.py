"""The results folder as ``farm view`` sees it: its runs, found by name only, read through
:mod:`farm.results`.

A name from a URL is never joined onto a path as it is: it must be the name of a run folder
directly inside the results folder (no separator, no leading dot), and that folder must still be
inside it once symlinks are resolved. So ``..``, ``%2e%2e``, an absolute path or a symlink out of
the folder all read as "no such run", and such a link is not listed either.
"""

from __future__ import annotations

import os
from pathlib import Path

from farm.errors import FarmError, UsageError
from farm.results import RunRecord, list_runs, read_run
from farm.results._reader import RUN_NAME

__all__ = ["NotFound", "ResultsFolder"]



class NotFound(FarmError, LookupError):
    """A run or a case that the results folder does not hold; the message says which (HTTP 404)."""


class ResultsFolder:
    """The folder ``farm view`` serves: every subfolder holding a run is a run."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()

    def runs(self) -> list[RunRecord]:
        """Every run folder, by name (:func:`farm.results.list_runs`)."""
        return list_runs(self.root)

    def run(self, name: str) -> RunRecord:
        """The run folder called ``name``; :class:`NotFound` unless it is a run directly inside the folder."""
        path = self.root / name
        if RUN_NAME.match(name) and path.is_dir():
            try:
                return read_run(path, root=self.root)
            except UsageError:
                pass
        raise NotFound(f"There is no run called {name!r} in {self.root}.")
