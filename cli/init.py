"""``farm init [DIR]``: a starter project that ``farm test`` runs green at once, offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["init"]


def init(
    folder: Annotated[
        Path, typer.Argument(metavar="[DIR]", help="Where to write it (default: this folder; made if missing).")
    ] = Path("."),
) -> None:
    """Write a starter farm.toml, a python agent and a suite of three cases (single-turn, static, dynamic)."""
    from farm.cli.app import fail

    from farm.errors import UsageError
    from farm.starter import write_starter

    if folder.exists() and not folder.is_dir():
        fail(UsageError(f"farm init {folder}: {folder} is a file; give a folder (or none for this one)"))
    try:
        written = write_starter(folder)
    except FileExistsError as exc:
        fail(UsageError(f"farm init: {exc.args[0]} exists; the farm writes no file over one (choose another DIR)"))
    except OSError as exc:
        fail(UsageError(f"farm init: cannot write in {folder}: {exc.strerror or exc}"))
    for path in written:
        typer.echo(f"wrote {path}")
    where = "" if folder.resolve() == Path.cwd().resolve() else f"cd {folder} && "
    typer.echo(f"next: {where}farm test -i suites/starter.jsonl")
