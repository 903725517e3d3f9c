"""Agent Test Farm: the engine-agnostic core (no Ray here).

``farm.actors`` (what runs on Ray) and ``farm.cli`` (the typer app) live in the
folders ``actors/`` and ``cli/`` beside this one. An installed farm has them
inside this package; in a source tree (a checkout, a Ray Jobs working dir)
:class:`_SourceTree` finds them beside it. Either way the only top-level
import name is ``farm``.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from farm._version import __version__

__all__ = ["RunResult", "__version__", "rescore", "run", "run_async"]


def __getattr__(name: str):  # the API is imported on first use: `import farm.cases` stays light
    if name in ("run", "run_async", "rescore", "RunResult"):
        from farm import api

        return getattr(api, name)
    raise AttributeError(f"module 'farm' has no attribute {name!r}")


class _SourceTree(importlib.abc.MetaPathFinder):
    """Imports ``farm.actors`` and ``farm.cli`` from the folders beside ``farm/`` in a source tree."""

    def __init__(self, folders: dict[str, Path]):
        self.folders = folders

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def _source_folders() -> dict[str, Path]:
    here = Path(__file__).resolve().parent
    return {
        f"farm.{name}": here.parent / name
        for name in ("actors", "cli")
        if not (here / name).is_dir() and (here.parent / name / "__init__.py").is_file()
    }


if _folders := _source_folders():
    sys.meta_path.insert(0, _SourceTree(_folders))  # before an editable install's finder: the folders beside *this* farm
