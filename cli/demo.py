"""``farm demo``: the bundled suite against the bundled expense agent, offline, no keys."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer
from farm.cli.options import JSONEvents, Quiet, Verbose

__all__ = ["demo", "demo_paths"]


def demo_paths() -> tuple[Path, Path]:
    """The bundled ``farm.toml`` and ``suite.jsonl``."""
    root = resources.files("farm.demo")
    return Path(str(root / "farm.toml")), Path(str(root / "suite.jsonl"))


def demo(
    verbose: Verbose = False,
    quiet: Quiet = False,
    results_dir: Annotated[Path | None, typer.Option("--results-dir", metavar="DIR", help="Where to write results (default: ./farm-results).")] = None,
    engine: Annotated[str | None, typer.Option("--engine", metavar="local|ray|auto", help="local (this process, the default for the demo's size), ray (the embedded Ray) or auto.")] = None,
    address: Annotated[str | None, typer.Option("--address", metavar="ADDRESS", help="Ray cluster address for the ray engine; default: embedded local Ray.")] = None,
    json_events: JSONEvents = False,
    input: Annotated[
        str | None,
        typer.Option("-i", "--input", help="Another input for the demo agent, e.g. agents:demo.generator?count=40 (default: the bundled suite)."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Send every role call; answer none from the role cache.")] = False,
) -> None:
    """Run the bundled demo suite on the bundled demo agent: offline, no keys."""
    from farm.cli.app import fail

    import farm
    from farm.config import load_config
    from farm.demo.agent import handle
    from farm.demo.server import JSONServer
    from farm.errors import FarmError

    config_path, suite_path = demo_paths()
    with JSONServer(handle) as server:
        try:
            config = load_config(config_path)
            config.connectors["demo"].base_url = f"{server.url}/v1"
            config.farm.results_dir = str((results_dir or Path("farm-results")).resolve())
            outcome = farm.run(
                input or str(suite_path), config=config, engine=engine, address=address,  # type: ignore[arg-type]
                timeout="1m", turn_timeout="30s", skip_interactive=True, json_events=json_events, verbose=verbose, quiet=quiet,
                cache=not no_cache, command=sys.argv,
            )
        except FarmError as exc:
            fail(exc)
    raise typer.Exit(outcome.exit_code)
