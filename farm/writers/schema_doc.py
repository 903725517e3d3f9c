"""The column tables of ``docs/results.md``, written from the row models.

The prose of the page is written by hand; each table of columns sits between
two markers and is written from its row model in :mod:`farm.writers.rows`::

    <!-- columns: cases -->
    | column | type | meaning |
    ...
    <!-- end columns -->

From the repository root::

    python -m farm.writers.schema_doc            # rewrite the tables of docs/results.md
    python -m farm.writers.schema_doc --check    # exit 1 if they are out of date
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import itertools
import re
import sys
from pathlib import Path

from pydantic import BaseModel

from farm.writers.arrowschema import arrow_schema, arrow_type, type_name
from farm.writers.rows import AssertionRow, CaseRow, RowModel, SpanRow, TurnRow

__all__ = ["COMMAND", "DOC", "TABLES", "column_docs", "column_table", "field_docstrings", "main", "update"]

#: The page, relative to the repository root.
DOC = Path("docs") / "results.md"
#: What regenerates the page's tables.
COMMAND = "python -m farm.writers.schema_doc"
#: The tables, by the name their markers give.
TABLES: dict[str, type[RowModel]] = {"cases": CaseRow, "turns": TurnRow, "assertions": AssertionRow, "spans": SpanRow}

_BLOCK = re.compile(r"(<!-- columns: (?P<table>\w+) -->\n).*?(<!-- end columns -->)", re.DOTALL)


def column_docs(row: type[RowModel]) -> dict[str, str]:
    """What each column of ``row`` means: the docstring under its field, or, for a field with none,
    the one under the same-named field of the record it is built from (``row.built_from``)."""
    own = field_docstrings(row)
    lent = field_docstrings(row.built_from) if row.built_from is not None else {}
    return {name: doc for name in row.model_fields if (doc := own.get(name) or lent.get(name))}


def column_table(row: type[RowModel]) -> str:
    """``row``'s columns as a Markdown table: name, Arrow type, meaning."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    docs = column_docs(row)
    for field in arrow_schema(row):
        meaning = _markdown(docs.get(field.name))
        struct = _struct_of(row, field.name)
        if struct is not None:
            struct_docs = column_docs(struct)
            meaning = meaning.rstrip(".") + ", each a struct of " + ", ".join(
                f"`{name}` {type_name(arrow_type(info.annotation))}"
                + (f" ({_clause(struct_docs[name])})" if name in struct_docs else "")
                for name, info in struct.model_fields.items()
            ) + "."
        lines.append(f"| `{field.name}` | {type_name(field.type)} | {meaning} |")
    return "\n".join(lines) + "\n"


def update(text: str) -> str:
    """``text`` with every marked table written anew from its row model."""

    def table(match: re.Match[str]) -> str:
        name = match["table"]
        if name not in TABLES:
            raise ValueError(f"{DOC} marks a table {name!r}; the tables are {', '.join(TABLES)}.")
        return match.group(1) + column_table(TABLES[name]) + match.group(3)

    return _BLOCK.sub(table, text)


def main(argv: list[str] | None = None) -> int:
    """``python -m farm.writers.schema_doc [PATH] [--check]``: write the tables, or exit 1 when they are stale."""
    parser = argparse.ArgumentParser(prog=COMMAND, description="Write the column tables of docs/results.md.")
    parser.add_argument("path", nargs="?", type=Path, default=DOC, help=f"the page (default: {DOC})")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if the tables are out of date")
    args = parser.parse_args(argv)
    if not args.path.is_file():
        print(f"Cannot write the column tables, as {args.path} does not exist; run this from the repository root.",
              file=sys.stderr)
        return 2
    text = args.path.read_text(encoding="utf-8")
    fresh = update(text)
    if args.check:
        if fresh != text:
            print(f"{args.path} is out of date; run: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    if fresh != text:
        args.path.write_text(fresh, encoding="utf-8")
    return 0


def _struct_of(row: type[RowModel], name: str) -> type[RowModel] | None:
    """The row model a list-of-structs column holds, e.g. :class:`ToolCallRow` for ``tool_calls``."""
    for arg in getattr(row.model_fields[name].annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, RowModel):
            return arg
    return None


def _markdown(docstring: str | None) -> str:
    """A field docstring as one Markdown line: rST ````code```` becomes ```code```."""
    return " ".join((docstring or "").split()).replace("``", "`").replace("|", "\\|")


def _clause(docstring: str) -> str:
    """A one-sentence docstring as a clause in parentheses: "The agent's call id." -> "the agent's call id"."""
    text = _markdown(docstring).rstrip(".")
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """The docstrings under the fields of ``model`` and its bases, by field name, read from their
    source: what ``use_attribute_docstrings`` gives a model that does not set it."""
    found: dict[str, str] = {}
    for owner in reversed(model.__mro__[: model.__mro__.index(BaseModel)]):
        body = next((node for node in _module_tree(owner.__module__) if getattr(node, "name", None) == owner.__name__), None)
        if not isinstance(body, ast.ClassDef):
            continue
        for node, after in itertools.pairwise(body.body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                found[node.target.id] = inspect.cleandoc(after.value.value)
    return found


@functools.cache
def _module_tree(name: str) -> list[ast.stmt]:
    """The top-level statements of module ``name``; none when its source is not installed
    (its columns then go without a meaning)."""
    try:
        return ast.parse(inspect.getsource(sys.modules[name])).body
    except (OSError, TypeError, KeyError):
        return []


if __name__ == "__main__":
    sys.exit(main())
