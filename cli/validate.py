"""``farm validate FILE...``: check test files and report every problem with file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["validate"]


def validate(files: Annotated[list[Path], typer.Argument(help="Test files (.jsonl, .json).")]) -> None:
    """Check test files; exit 2 if any line or case has a problem."""
    from farm.errors import FarmError, InputError
    from farm.loader import load_file

    console = Console(highlight=False, soft_wrap=True)
    problems: list[str] = []
    valid = 0
    for path in files:
        try:
            suite = load_file(path)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        except FarmError as exc:
            problems.append(str(exc))
            continue
        problems.extend(suite.problems)
        valid += sum(1 for c in suite.cases if c.ok)
    for problem in problems:
        console.print(f"[red]error:[/red] {problem}")
    console.print(f"{valid} valid case(s) in {len(files)} file(s); {len(problems)} problem(s)")
    raise typer.Exit(2 if problems else 0)
