"""The generated tables of ``docs/reference/``: written from the code they describe.

Not a command: a tool for the repository, as :mod:`farm.writers.schema_doc` is for
``docs/results.md``. The prose of each page is written by hand; each table sits
between two markers and is written from its one source::

    <!-- generated: case -->
    | field | type | default | meaning |
    ...
    <!-- end generated -->

The sources: the docstrings under the fields of the case models (:mod:`farm.cases`) and of
``farm.toml``'s models (:mod:`farm.config`), the assertion registry (each type's checker and the
keys it registered, :func:`farm.assertions.registry.assertion`), and the ``farm`` app's click
commands (each option's names, metavar, default and help). A field, key, assertion type or
option without an entry is therefore a stale page, which ``--check`` (and a test) reports.

From the repository root::

    python -m farm.cli.reference            # rewrite the tables of docs/reference/*.md
    python -m farm.cli.reference --check    # exit 1 if any is out of date
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from farm.writers.schema_doc import field_docstrings

__all__ = ["COMMAND", "PAGES", "command_table", "field_table", "main", "marked", "missing_docs", "tables_of", "update"]

#: The pages, relative to the repository root.
PAGES = Path("docs") / "reference"
#: What regenerates the pages' tables.
COMMAND = "python -m farm.cli.reference"

_BLOCK = re.compile(r"(<!-- generated: (?P<table>[\w.-]+) -->\n).*?(<!-- end generated -->)", re.DOTALL)


# -- field tables ------------------------------------------------------------------------------


def field_table(model: type[BaseModel], *, skip: tuple[str, ...] = (), column: str = "field") -> str:
    """``model``'s fields as a Markdown table: name, type, default, meaning (the field's docstring),
    then the other spellings it accepts (``model.other_spellings``)."""
    docs = field_docstrings(model)
    lines = [f"| {column} | type | default | meaning |", "|---|---|---|---|"]
    durations = _duration_fields(model)
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        duration = name in durations
        kind = "duration" if duration else _type_name(info.annotation)
        default = _default(info, duration)
        lines.append(f"| `{name}` | {kind} | {default} | {_markdown(docs.get(name, ''))} |")
    for name, meaning in getattr(model, "other_spellings", {}).items():
        lines.append(f"| `{name}` | | | {_markdown(meaning)} |")
    return "\n".join(lines) + "\n"


def missing_docs(model: type[BaseModel], skip: tuple[str, ...] = ()) -> list[str]:
    """The fields of ``model`` with no docstring: each must have one, as it is its reference entry."""
    docs = field_docstrings(model)
    return [name for name in model.model_fields if name not in skip and not docs.get(name)]


def _duration_fields(model: type[BaseModel]) -> set[str]:
    """The fields a validator reads as a duration (``30s``, ``2m``): those whose validator calls ``parse_duration``."""
    found: set[str] = set()
    for decorator in model.__pydantic_decorators__.field_validators.values():
        code = getattr(getattr(decorator.func, "__func__", decorator.func), "__code__", None)
        if code is not None and "parse_duration" in code.co_names:
            found.update(decorator.info.fields)
    return found


def _type_name(annotation: Any) -> str:
    """An annotation in the words of a JSON or TOML user: ``string``, ``array of string``, ``object``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(arg) for arg in typing.get_args(annotation) if arg is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if origin is typing.Literal:
        return " or ".join(f"`{json.dumps(arg)}`" for arg in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return "array" if item is Any else f"array of {_type_name(item)}"
    if origin is dict or annotation is dict:
        return "object"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " or ".join(f'`"{member.value}"`' for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
    return names.get(annotation, "any")


def _default(info: Any, duration: bool) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_defaults=True)
    if duration and isinstance(value, (int, float)):
        return f"`{value:g}s`"
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{json.dumps(value)}`"


# -- assertion tables --------------------------------------------------------------------------


def assertion_types_table() -> str:
    """Every registered assertion type with the keys it reads and what each means."""
    from farm.assertions.registry import checkers, fields_of

    lines = ["| type | key | meaning |", "|---|---|---|"]
    for name, checker in sorted(checkers().items(), key=lambda item: _where(item[1])):
        summary = _markdown(_first_paragraph(inspect.getdoc(checker) or ""))
        lines.append(f"| [`{name}`](#{name}) | | {summary} |")
        for key, meaning in fields_of(name).items():
            lines.append(f"| | `{key}` | {_markdown(meaning)} |")
    return "\n".join(lines) + "\n"


def _where(checker: Any) -> tuple[str, int]:
    """Where a checker is written: the table's order, whichever module registered first."""
    return checker.__module__, checker.__code__.co_firstlineno


def _first_paragraph(text: str) -> str:
    return text.split("\n\n", 1)[0]


# -- command tables ----------------------------------------------------------------------------


def command_table(name: str | None) -> str:
    """A ``farm`` command (None: the app itself) as Markdown: its usage, what it does, and a table of
    its arguments and options (names, metavar, default, help)."""
    from farm.cli.app import app
    from typer.main import get_command

    group: Any = get_command(app)
    command = group if name is None else group.commands[name]
    ctx = command.context_class(command, info_name="farm" if name is None else f"farm {name}")
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"```\n{ctx.command_path} {usage}\n```", "", _markdown(inspect.cleandoc(command.help or "")), ""]
    lines += ["| argument or option | value | default | meaning |", "|---|---|---|---|"]
    for param in command.params:
        if param.param_type_name == "argument":
            names = f"`{(param.metavar or param.name.upper()).strip('[]')}`" + (" (several)" if param.nargs != 1 else "")
            value = ""
        else:
            names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
            value = "" if param.is_flag else f"`{param.metavar or param.name.upper()}`".replace("|", "\\|")
        default = param.default
        shown = "" if default in (None, False, ()) or callable(default) else f"`{default}`"
        meaning = _markdown(getattr(param, "help", None) or "")
        if getattr(param, "multiple", False) and "repeat" not in meaning.lower():
            meaning += " Repeatable."
        lines.append(f"| {names} | {value} | {shown} | {meaning.strip()} |")
    lines.append("| `-h`, `--help` | | | Show the help and exit. |")
    return "\n".join(lines) + "\n"


# -- the pages ---------------------------------------------------------------------------------


def tables_of() -> dict[str, Callable[[], str]]:
    """Every generated table, by the name its markers give."""
    from farm.cli.app import COMMANDS

    from farm.cases import Checkpoint, GoldenRule, Interactive, Options, SimulatorSpec, TestCase, Turn
    from farm.config import AgentConfig, Connector, FarmSettings, Price, Resources

    tables: dict[str, Callable[[], str]] = {
        "case": lambda: field_table(TestCase),
        "turn": lambda: field_table(Turn),
        "checkpoint": lambda: field_table(Checkpoint),
        "simulator": lambda: field_table(SimulatorSpec),
        "options": lambda: field_table(Options),
        "interactive": lambda: field_table(Interactive),
        "golden": lambda: field_table(GoldenRule),
        "farm": lambda: field_table(FarmSettings, column="key"),
        "connector": lambda: field_table(Connector, skip=("name",), column="key"),
        "price": lambda: field_table(Price, column="key"),
        "agent": lambda: field_table(AgentConfig, skip=("id",), column="key"),
        "resources": lambda: field_table(Resources, column="key"),
        "assertion-common": lambda: _common_assertion_table(),
        "assertion-types": assertion_types_table,
        "command.farm": lambda: command_table(None),
    }
    for command in COMMANDS:
        tables[f"command.{command}"] = lambda command=command: command_table(command)  # type: ignore[misc]
    return tables


def _common_assertion_table() -> str:
    from farm.cases import AssertionSpec
    from farm.suite.validation import ASSERTION_COMMON

    return field_table(AssertionSpec, skip=tuple(name for name in AssertionSpec.model_fields if name not in ASSERTION_COMMON))


def update(text: str, tables: dict[str, Callable[[], str]] | None = None) -> str:
    """``text`` with every marked table written anew from its source."""
    tables = tables_of() if tables is None else tables

    def table(match: re.Match[str]) -> str:
        name = match["table"]
        if name not in tables:
            raise ValueError(f"a page marks a table {name!r}; the tables are {', '.join(tables)}.")
        return match.group(1) + tables[name]() + match.group(3)

    return _BLOCK.sub(table, text)


def marked(text: str) -> list[str]:
    """The names of the tables ``text`` marks, in order."""
    return [match["table"] for match in _BLOCK.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    """``python -m farm.cli.reference [FOLDER] [--check]``: write the tables, or exit 1 when one is stale."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write the generated tables of docs/reference/.")
    parser.add_argument("folder", nargs="?", type=Path, default=PAGES, help=f"the pages' folder (default: {PAGES})")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is out of date")
    args = parser.parse_args(argv)
    pages = sorted(args.folder.glob("*.md"))
    if not pages:
        print(f"Cannot write the reference tables, as {args.folder} holds no page; run this from the repository root.", file=sys.stderr)
        return 2
    tables = tables_of()
    stale = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        fresh = update(text, tables)
        if fresh != text:
            stale.append(page)
            if not args.check:
                page.write_text(fresh, encoding="utf-8")
    if args.check and stale:
        print(f"{', '.join(map(str, stale))} out of date; run: {COMMAND}", file=sys.stderr)
        return 1
    return 0


def _markdown(docstring: str) -> str:
    """A docstring as one Markdown table cell: rST ````code```` becomes ```code```."""
    return " ".join(docstring.split()).replace("``", "`").replace("|", "\\|")


if __name__ == "__main__":
    sys.exit(main())
