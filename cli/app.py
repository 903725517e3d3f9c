"""The ``farm`` app: one module per command; user mistakes print one sentence and exit 2."""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup
from typer.main import get_command_from_info
from typer.models import CommandInfo

from farm.errors import ConfigError, FarmError, InputError, UsageError

__all__ = ["YOUNG_THRESHOLD", "app", "err_console", "fail", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "test": ("farm.cli.test", "Run a suite against an agent."),
    "demo": ("farm.cli.demo", "Run the bundled demo suite on the demo agent, offline."),
    "init": ("farm.cli.init", "Write a starter project: farm.toml, a python agent, a suite."),
    "validate": ("farm.cli.validate", "Check test files and report every problem."),
    "agents": ("farm.cli.agents", "List configured agents and connectors."),
    "report": ("farm.cli.report", "Summarise runs: statuses, flaky cases, changed cases."),
    "rescore": ("farm.cli.rescore", "Judge a run's recorded conversations again."),
    "view": ("farm.cli.view", "Browse and compare runs in a local web app."),
}
"""Command name → (its module, which defines a function of that name; its line in ``farm --help``)."""


MISSING_ARGUMENTS = {
    "validate": "name the suite files (or folders) to check, e.g. farm validate suites/",
}
"""What a command says when its arguments are left out (others: see its ``--help``)."""


class _Commands(MutableMapping[str, Any]):
    """The app's click commands, each built from its module when it is first looked up: a command
    imports only its own module, so ``farm test`` never loads the reports and the viewer that
    ``farm report`` and ``farm view`` need, and ``farm --help`` loads none."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            module, short_help = COMMANDS[name]  # KeyError: no such command
            callback = getattr(importlib.import_module(module), name)
            info = CommandInfo(name=name, callback=callback, short_help=short_help)
            self._built[name] = get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
            )
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("the farm's commands are fixed")


class _Group(TyperGroup):
    """The ``farm`` group over :class:`_Commands`; its help lists the commands from :data:`COMMANDS`."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, short_help) for name, (_, short_help) in COMMANDS.items()])

    def invoke(self, ctx: Any) -> Any:
        """Run the command; an argument it needs and was not given is said as the farm says a
        mistake (one sentence, exit 2), not as click's ``Missing argument 'FILE'``."""
        try:
            return super().invoke(ctx)
        except _missing_parameter() as exc:
            if getattr(exc.param, "param_type_name", None) != "argument" or exc.ctx is None:
                raise
            name = exc.ctx.info_name or ""
            usage = _usage_name(exc.param)
            hint = MISSING_ARGUMENTS.get(name, f"give {usage} (see farm {name} --help)")
            fail(UsageError(f"farm {name} {usage}: {hint}"))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name in SERVERS:  # its heap is a server's, not a start-up's: Python's own policy
            gc.set_threshold(*PYTHON_THRESHOLD)
        return name, command, rest


def _version(asked: bool) -> None:
    """``farm --version``: the farm's, and those of Python and Ray it runs on (read from the
    installed packages, not imported: it answers at once)."""
    if not asked:
        return
    from importlib import metadata

    from farm import __version__

    try:
        ray = f", Ray {metadata.version('ray')}"
    except metadata.PackageNotFoundError:
        ray = ""
    typer.echo(f"agent-test-farm {__version__} (Python {sys.version.split()[0]}{ray})")
    raise typer.Exit(0)


def _farm(
    version: Annotated[bool, typer.Option("--version", help="Print the farm's version and exit.", is_eager=True, callback=_version)] = False,
) -> None:
    """The group's own callback: the options of the whole app."""


app = typer.Typer(
    name="farm",
    cls=_Group,
    callback=_farm,
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


def _missing_parameter() -> tuple[type[Any], ...]:
    """click's ``MissingParameter``, and that of the click typer carries in itself (from 0.2x): of
    those loaded, as one not loaded cannot have been raised (and a run imports no click of its own)."""
    modules = (sys.modules.get(name) for name in ("typer._click.exceptions", "click.exceptions"))
    return tuple(module.MissingParameter for module in modules if module is not None and hasattr(module, "MissingParameter"))


def _usage_name(self: Any) -> str:
    """An argument on the usage line as click and pytest write it: ``FILE...``, ``[PATH]...``
    (typer's own wraps a required one in braces: ``{FILE}...``)."""
    name = self.metavar or self.name.upper()
    return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")


def _plain_usage() -> None:
    argument: Any = getattr(getattr(typer, "core", None), "TyperArgument", None)
    if argument is not None and hasattr(argument, "_usage_display_name"):  # absent in other typer versions
        argument._usage_display_name = _usage_name


_plain_usage()


from farm._run import YOUNG_THRESHOLD  # noqa: E402  (a leaf: the run machinery is not imported)

SERVERS = frozenset({"view"})
"""Commands that serve until they are stopped: they keep :data:`PYTHON_THRESHOLD`, as what a
server allocates after its start is its requests' (``farm view`` over 100k cases measured the
same either way, its peak RSS within the 300-320 MB that repeated runs differ by)."""

PYTHON_THRESHOLD = gc.get_threshold()
"""The collector's thresholds before :func:`main` set its own."""


def main() -> None:
    """The ``farm`` console script: run the app; a user error prints one sentence and exits 2.

    A young pass of the collector comes every :data:`YOUNG_THRESHOLD` allocations: what a
    command allocates before its work (modules, classes, models, the config and the suite)
    lives as long as the process, and collecting after every 700 of them, 120 passes, cost
    a 10-case ``farm test`` a tenth of its CPU. A run sets its own while its cases run
    (``farm/_run/execution.py``); a server (:data:`SERVERS`) goes back to Python's once chosen."""
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
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
