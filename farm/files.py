"""Files written whole: a reader finds the old file or the new one, never half of one; and what
stands in the way of writing one (:func:`blocked`), said before a run rather than after it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

__all__ = ["atomic_file", "blocked"]


@contextmanager
def atomic_file(path: Path, mode: Literal["w", "wb"] = "w", *, fsync: bool = True) -> Iterator[IO[Any]]:
    """Open a new temporary file beside ``path`` for writing; when the block ends
    normally it replaces ``path`` in one step, when it raises it is removed.

    The temporary file's name is ``.<name>.<random>.tmp``, its own for each call,
    so concurrent writers of one path never write into each other's file (the
    last rename wins). ``fsync``: the data is on disk before the rename, so a
    crash right after it leaves the new file whole (a cache entry, which can be
    made again, does without).
    """
    temp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
    file = open(temp, mode.replace("w", "x"), encoding=None if "b" in mode else "utf-8")  # "x": never another's file
    try:
        with file:
            yield file
            if fsync:
                file.flush()
                os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def blocked(path: Path, folder: bool = False, example: str = "") -> str | None:
    """What stands in the way of writing a file at ``path`` (``folder``: of making a folder there),
    as the end of a sentence that names the option first; None when nothing does. A folder where a
    file goes, a file where a folder goes (``path`` or one of its parents), a folder that cannot be
    written in. ``example``: a file's name to suggest in a folder given where a file goes."""
    if path.exists():
        if path.is_dir() != folder:
            return (
                f"{path} is a file; give a folder (made if missing)"
                if folder
                else f"{path} is a folder; give a file's path{f' (e.g. {path / example})' if example else ''}"
            )
        if folder:
            return None if os.access(path, os.W_OK | os.X_OK) else f"cannot write in {path} (permission denied)"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"{parent} is a file, so no folder can be made there; give a path in a folder"
            return None if os.access(parent, os.W_OK | os.X_OK) else f"cannot write in {parent} (permission denied)"
    return None
