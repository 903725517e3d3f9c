"""``run.json``: what a run was — its resolved configuration (no secrets), versions, start, end, command line.

The caller decides what goes in; this module only writes it so that a reader
never sees half a file, and reads it back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from farm.errors import UsageError

__all__ = ["RUN_JSON", "read_run_json", "write_run_json"]

RUN_JSON = "run.json"


def write_run_json(run_dir: str | os.PathLike[str], info: dict[str, Any]) -> Path:
    """Write ``info`` to ``run_dir/run.json`` atomically (tmp file, fsync, rename); return its path.

    ``run_dir`` is created if needed. Values JSON cannot hold (paths, dates)
    are written as their ``str()``. Call it again to update the file (e.g.
    with the end time): a reader sees the old or the new file, never a mix.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RUN_JSON
    tmp = run_dir / f".{RUN_JSON}.tmp"
    text = json.dumps(info, indent=2, ensure_ascii=False, default=str) + "\n"
    with open(tmp, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)
    return path


def read_run_json(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The info in ``run_dir/run.json``; :class:`~farm.errors.UsageError` when missing or unreadable."""
    path = Path(run_dir) / RUN_JSON
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"Cannot read the run's info, as {path} does not exist; is {run_dir} a run folder?") from None
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"Cannot read the run's info, as {path} is not valid JSON ({exc}).") from None
    if not isinstance(info, dict):
        raise UsageError(f"Cannot read the run's info, as {path} holds a JSON {type(info).__name__}, not an object.")
    return info
