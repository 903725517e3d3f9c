"""``farm demo``: the bundled suite against the bundled expense agent, offline, on the embedded Ray."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Optional

import typer

__all__ = ["demo", "demo_paths"]


def demo_paths() -> tuple[Path, Path]:
    """The bundled ``farm.toml`` and ``suite.jsonl``."""
    root = resources.files("farm.demo")
    return Path(str(root / "farm.toml")), Path(str(root / "suite.jsonl"))


def demo(
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Show every turn of every case.")] = False,
    results_dir: Annotated[Optional[Path], typer.Option("--results-dir", help="Where to write results (default: ./farm-results).")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Ray cluster address; default: embedded local Ray.")] = None,
    json_events: Annotated[bool, typer.Option("--json", help="NDJSON events on stdout instead of the console tree.")] = False,
) -> None:
    """Run the bundled demo suite on the bundled demo agent: offline, no keys."""
    from cli.app import fail
    from cli.test import _test
    from farm.demo.agent import handle
    from farm.demo.server import JSONServer
    from farm.errors import FarmError

    config_path, suite_path = demo_paths()
    with JSONServer(handle) as server:
        try:
            code = _test(
                input=str(suite_path), name=None, output=None, connector=None, verbose=verbose,
                interactive=False, skip_interactive=True, on_missing_input="skip", simulator=None,
                timeout="1m", turn_timeout="30s", parallel=None, fail_fast=False, dry_run=False, runs=1,
                run=None, tag=None, config=str(config_path), address=address, resume=None, junit=None,
                html=None, json_events=json_events, before=None, after=None, reporter_agent=None,
                _overrides={"connectors.demo.base_url": f"{server.url}/v1", "farm.results_dir": str((results_dir or Path("farm-results")).resolve())},
            )
        except FarmError as exc:
            fail(exc)
    raise typer.Exit(code)
