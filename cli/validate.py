"""``farm validate FILE...``: check test files and report every problem with file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

__all__ = ["validate"]


def validate(
    files: Annotated[list[Path], typer.Argument(metavar="FILE", help="Test files (.jsonl, .json).", show_default=False)],
    config: Annotated[str | None, typer.Option("--config", metavar="PATH", help="Path to farm.toml (default: ./farm.toml, else beside the file).")] = None,
    simulator: Annotated[str | None, typer.Option("--simulator", metavar="AGENT", help="The default simulator the run would use.")] = None,
) -> None:
    """Check test files deeply (fields, regex, JSONPath, ids against farm.toml); exit 2 on any problem."""
    from farm.config import find_config, load_config
    from farm.errors import ConfigError, FarmError, InputError
    from farm.suite.checks import check_suite
    from farm.suite.loader import load_file

    console = Console(highlight=False, soft_wrap=True, emoji=False)
    problems: list[str] = []
    warnings: list[str] = []
    valid = 0
    for path in files:
        try:
            suite = load_file(path)
            cfg = load_config(find_config(config, path))
            check_suite(suite, cfg, default_simulator=simulator)
        except (InputError, ConfigError) as exc:  # a farm.toml beside several files: its problems once
            problems.extend(p for p in exc.problems if p not in problems)
            continue
        except FarmError as exc:
            problems.append(str(exc))
            continue
        problems.extend(suite.problems)
        warnings.extend(suite.warnings)
        valid += sum(1 for c in suite.cases if c.ok)
    for problem in problems:
        console.print(Text.assemble(("error:", "red"), " ", problem))
    for warning in warnings:
        console.print(Text.assemble(("warning:", "yellow"), " ", warning))
    console.print(Text(f"{valid} valid case(s) in {len(files)} file(s); {len(problems)} problem(s)"))
    raise typer.Exit(2 if problems else 0)
