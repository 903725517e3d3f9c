"""Options that several commands take, declared once: ``farm test`` and ``farm rescore`` (and
``farm demo``, ``farm agents``) say ``--junit``, ``--html``, ``--json``, ``-v``, ``--config`` and
``--run`` the same way.

Each is an ``Annotated`` type for a command's parameter; the command gives the default::

    def rescore(..., verbose: Verbose = False, junit: JUnitPath = None) -> None: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ConfigPath", "HTMLPath", "JSONEvents", "JUnitPath", "Match", "Tags", "Verbose"]

ConfigPath = Annotated[str | None, typer.Option("--config", help="Path to farm.toml.")]
Verbose = Annotated[bool, typer.Option("-v", "--verbose", help="Show every turn of every case.")]
Match = Annotated[str | None, typer.Option("--run", help="Only cases whose id matches this regex.")]
JUnitPath = Annotated[Path | None, typer.Option("--junit", help="Also write JUnit XML here.")]
HTMLPath = Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML report here.")]
JSONEvents = Annotated[bool, typer.Option("--json", help="NDJSON events on stdout instead of the console tree.")]
Tags = Annotated[list[str] | None, typer.Option("--tag", help="Only cases carrying this tag (repeatable).")]
