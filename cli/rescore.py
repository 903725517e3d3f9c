"""``farm rescore``: re-evaluate a suite's assertions against the conversations a run recorded
(docs/reference/cli.md). Parses the options and calls :func:`farm.rescore`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from farm.cli.options import ConfigPath, HTMLPath, JSONEvents, JUnitPath, Match, Quiet, Tags, Verbose

from farm.errors import FarmError

__all__ = ["rescore"]


def rescore(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="The run folder to rescore (farm-results/<run_id>).", show_default=False)],
    input: Annotated[list[str] | None, typer.Option("-i", "--input", metavar="SUITE", help="The suite to judge with (an edited copy; repeatable, as farm test's -i); default: the run's own.")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="PATH", help="Results JSONL path (default: <new run_id>/results.jsonl beside the run folder).")] = None,
    config: ConfigPath = None,
    run: Match = None,
    tag: Tags = None,
    no_cache: Annotated[bool | None, typer.Option("--no-cache", help="Call the validators even where the role cache has their answer.")] = None,
    verbose: Verbose = None,
    quiet: Quiet = None,
    junit: JUnitPath = None,
    html: HTMLPath = None,
    json_events: JSONEvents = None,
) -> None:
    """Re-check a run's recorded conversations with the suite's (or an edited suite's) assertions; the agent is not called. The run's own --run/--tag selection is kept unless given."""
    from farm.cli.app import fail

    import farm

    try:
        outcome = farm.rescore(
            run_dir,
            input or None,
            config=config,
            output=output,
            match=run,
            tags=tag,
            cache=False if no_cache else None,
            junit=junit,
            html=html,
            json_events=json_events,
            verbose=verbose,
            quiet=quiet,
            command=sys.argv,
        )
    except FarmError as exc:
        fail(exc)
    raise typer.Exit(outcome.exit_code)
