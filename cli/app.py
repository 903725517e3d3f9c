"""The ``farm`` app: one module per command; user mistakes print one sentence and exit 2."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from farm.errors import ConfigError, FarmError, InputError

__all__ = ["app", "err_console", "fail", "main"]

app = typer.Typer(
    name="farm",
    help="Agent Test Farm: run test suites against conversational AI agents, in parallel on Ray.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help, as click and pytest print it: no boxes that cut long words, no type noise
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 160},
)

err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def fail(exc: FarmError) -> None:
    """Print a user error as ``error: ...`` lines (one per problem) and exit 2."""
    problems = exc.problems if isinstance(exc, (InputError, ConfigError)) else [str(exc)]
    for problem in problems:
        err_console.print(Text.assemble(("error:", "red"), " ", problem), highlight=False)
    raise typer.Exit(2)


def _register() -> None:
    from farm.cli import agents, demo, report, rescore, test, validate, view

    app.command("test", short_help="Run a suite against an agent.")(test.test)
    app.command("demo", short_help="Run the bundled demo suite on the demo agent, offline.")(demo.demo)
    app.command("validate", short_help="Check test files and report every problem.")(validate.validate)
    app.command("agents", short_help="List configured agents and connectors.")(agents.agents)
    app.command("report", short_help="Summarise runs: statuses, flaky cases, regressions.")(report.report)
    app.command("rescore", short_help="Judge a run's recorded conversations again.")(rescore.rescore)
    app.command("view", short_help="Browse and compare runs in a local web app.")(view.view)


def _usage_name(self: Any) -> str:
    """An argument on the usage line as click and pytest write it: ``FILE...``, ``[PATH]...``
    (typer's own wraps a required one in braces: ``{FILE}...``)."""
    name = self.metavar or self.name.upper()
    return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")


def _plain_usage() -> None:
    argument: Any = getattr(getattr(typer, "core", None), "TyperArgument", None)
    if argument is not None and hasattr(argument, "_usage_display_name"):  # absent in other typer versions
        argument._usage_display_name = _usage_name


_register()
_plain_usage()


def main() -> None:
    """The ``farm`` console script: run the app; a user error prints one sentence and exits 2."""
    try:
        try:
            app()
        except FarmError as exc:  # raised outside a command's own handler
            try:
                fail(exc)
            except typer.Exit as stop:
                sys.exit(stop.exit_code)
    except SystemExit as done:  # how every command ends
        _exit_now(done.code)


def _exit_now(code: int | str | None) -> None:
    """Exit without tearing the interpreter down: after a run that held Ray, pyarrow and
    pydantic, Python spends ~0.5 s freeing modules that the OS frees at once. Everything
    the command wrote is closed by now; exit handlers still run and the streams are flushed."""
    import atexit
    import os

    if isinstance(code, str):  # sys.exit("message") prints it and exits 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(code or 0)
