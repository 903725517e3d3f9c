"""Options that several commands take, declared once: ``farm test`` and ``farm rescore`` (and
``farm demo``, ``farm agents``) say ``--junit``, ``--html``, ``--json``, ``-v``, ``--config`` and
``--run`` the same way.

Each is an ``Annotated`` type for a command's parameter, whose default is None (not given): the
option's default is the one :data:`farm._run.request.OPTIONS` says::

    def rescore(..., verbose: Verbose = None, junit: JUnitPath = None) -> None: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["ConfigPath", "HTMLPath", "JSONEvents", "JUnitPath", "Match", "Quiet", "Tags", "Verbose", "configured_results_dir"]

ConfigPath = Annotated[str | None, typer.Option("--config", metavar="PATH", help="Path to farm.toml.")]
Verbose = Annotated[bool | None, typer.Option("-v", "--verbose", help="Show every turn of every case, and errors whole.")]
Quiet = Annotated[bool | None, typer.Option("-q", "--quiet", help="Print one line per failure and the summary.")]
Match = Annotated[str | None, typer.Option("--run", metavar="REGEX", help="Only cases whose id matches this regex.")]
JUnitPath = Annotated[Path | None, typer.Option("--junit", metavar="PATH", help="Also write JUnit XML here.")]
HTMLPath = Annotated[Path | None, typer.Option("--html", metavar="PATH", help="Also write a self-contained HTML report here.")]
JSONEvents = Annotated[bool | None, typer.Option("--json", help="NDJSON events on stdout instead of the console tree.")]
Tags = Annotated[list[str] | None, typer.Option("--tag", metavar="TAG", help="Only cases carrying this tag (repeatable).")]


def configured_results_dir(config: str | None) -> Path:
    """``[farm].results_dir`` of ``--config`` or ``./farm.toml`` (``farm-results`` without one): where
    the commands that read runs look when given no folder."""
    from farm.config import find_config, load_config  # the config's models: only when a command asks

    return load_config(find_config(config)).results_dir
