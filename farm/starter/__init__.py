"""The starter project ``farm init`` writes: a ``farm.toml``, a python agent and its simulator,
and a suite of three cases (single-turn, static, dynamic) that ``farm test`` runs green at once,
offline. The files are beside this module, written as they are."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["FILES", "write_starter"]

FILES = ("farm.toml", "shop.py", "suites/starter.jsonl")
"""What ``farm init`` writes, relative to its folder."""


def write_starter(folder: Path) -> list[Path]:
    """Write the starter project into ``folder`` (made if missing); returns the files written.
    Refuses, before writing anything, when one of them exists: raises ``FileExistsError`` naming it."""
    targets = [folder / name for name in FILES]
    for target in targets:
        if target.exists():
            raise FileExistsError(target)
    root = resources.files(__name__)
    for name, target in zip(FILES, targets, strict=True):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((root / name.replace("suites/", "")).read_text(encoding="utf-8"), encoding="utf-8")
    return targets
