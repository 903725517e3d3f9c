"""Files written whole: a reader finds the old file or the new one, never half of one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

__all__ = ["atomic_file"]


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
