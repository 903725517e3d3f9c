"""``farm.toml``'s mistakes, every one at once, each naming its line (docs/reference/config.md).

:func:`config_problems` walks the parsed file against the config models (which
:mod:`farm.config` hands it, the keys of each table with them): a key
the farm does not know is a problem naming the nearest known key (the suite's
did-you-mean, :func:`farm.wording.nearest`), and every error of the
models is said in the farm's words, not pydantic's. ``tomllib`` gives no line
numbers, so :func:`key_lines` finds them by reading the text: ``[table]`` and
``[[array]]`` headers, dotted and quoted keys, and inline tables written on one
line, which is how ``farm.toml`` files are written. A file that is not TOML at all is said by
:func:`toml_problem`, in the farm's words rather than ``tomllib``'s.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ValidationError

from farm.wording import nearest, shown

__all__ = ["config_problems", "key_lines", "key_place", "toml_problem"]

Path_ = tuple[str, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_HEADER = re.compile(r"\s*\[\[?(.*?)\]\]?\s*(?:#.*)?$")


# -- where each key is written --------------------------------------------------------------


def _key(text: str, at: int) -> tuple[list[str], int] | None:
    """The dotted key starting at ``text[at]`` (bare or quoted parts) and where it ends."""
    parts: list[str] = []
    while True:
        while at < len(text) and text[at] in " \t":
            at += 1
        if at < len(text) and text[at] in "\"'":
            quote = text[at]
            end = _skip_string(text, at) - 1  # the closing quote
            if end >= len(text):
                return None
            raw = text[at + 1 : end]
            parts.append(raw.encode("utf-8").decode("unicode_escape") if quote == '"' and "\\" in raw else raw)
            at = end + 1
        else:
            bare = _BARE.match(text, at)
            if bare is None:
                return None
            parts.append(bare[0])
            at = bare.end()
        while at < len(text) and text[at] in " \t":
            at += 1
        if at < len(text) and text[at] == ".":
            at += 1
            continue
        return parts, at


def _skip_string(text: str, at: int) -> int:
    """Where the quoted string starting at ``text[at]`` ends (just past its closing quote; past the
    text's end when it is not closed)."""
    quote = text[at]
    end = at + 1
    while end < len(text) and text[end] != quote:
        end += 2 if quote == '"' and text[end] == "\\" else 1
    return end + 1


def _inline(value: str, base: Path_) -> Iterator[Path_]:
    """The keys of the inline tables in ``value`` (the text after ``key =``), as full paths."""
    stack: list[tuple[str, Path_]] = []  # '{' with its table's path, or '['
    current, expect_key, at = base, False, 0
    while at < len(value):
        char = value[at]
        if expect_key and char not in " \t":
            found = _key(value, at)
            if found is None:
                return
            current = stack[-1][1] + tuple(found[0])
            yield current
            expect_key, at = False, found[1]
            continue
        if char in "\"'":
            at = _skip_string(value, at)
            continue
        if char == "#":
            return
        if char == "{":
            stack.append(("{", current))
            expect_key = True
        elif char == "[":
            stack.append(("[", current))
        elif char in "}]" and stack:
            stack.pop()
        elif char == "," and stack and stack[-1][0] == "{":
            expect_key = True
        at += 1


def key_lines(text: str) -> dict[Path_, int]:
    """The line (from 1) where each table and key of ``text`` is first written."""
    lines: dict[Path_, int] = {}
    table: Path_ = ()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        header = _HEADER.match(line) if stripped.startswith("[") else None
        if header is not None:
            found = _key(header[1], 0)
            if found is not None:
                table = tuple(found[0])
                for depth in range(1, len(table) + 1):
                    lines.setdefault(table[:depth], number)
            continue
        found = _key(line, 0)
        if found is None or found[1] >= len(line) or line[found[1]] != "=":
            continue
        path = table + tuple(found[0])
        for depth in range(len(table) + 1, len(path) + 1):
            lines.setdefault(path[:depth], number)
        for inner in _inline(line[found[1] + 1 :], path):
            lines.setdefault(inner, number)
    return lines


def _line(lines: dict[Path_, int], path: Path_) -> int | None:
    """The line of ``path``, else of the nearest table around it that is written."""
    for depth in range(len(path), 0, -1):
        if path[:depth] in lines:
            return lines[path[:depth]]
    return None


def key_place(name: str, text: str, path: Path_) -> str:
    """How a problem of the key at ``path`` begins, as every problem of the file does:
    ``farm.toml:12: key 'entry'`` (``name``: the file as the user wrote it, ``text``: its text)."""
    line = _line(key_lines(text), path)
    return f"{name}:{line}: key '{shown(path[-1])}'" if line else f"{name}: key '{_where(path)}'"


# -- what is wrong ---------------------------------------------------------------------------


def _unknown(data: dict[str, Any], tables: dict[str, frozenset[str]]) -> Iterator[tuple[dict[str, Any], Path_, str, frozenset[str]]]:
    """Every key the farm does not know: the table holding it, the table's path, the key, the known keys."""

    def check(table: Any, path: Path_, known: frozenset[str]) -> Iterator[tuple[dict[str, Any], Path_, str, frozenset[str]]]:
        if isinstance(table, dict):
            yield from ((table, path, key, known) for key in list(table) if key not in known)

    yield from check(data, (), tables["top"])
    yield from check(data.get("farm"), ("farm",), tables["farm"])
    for group, own, sub in (("connectors", "connector", "price"), ("agents", "agent", "resources")):
        for name, table in _tables_of(data, group):
            yield from check(table, (group, name), tables[own])
            yield from check(table.get(sub), (group, name, sub), tables[sub])


def _tables_of(data: dict[str, Any], group: str) -> list[tuple[str, dict[str, Any]]]:
    """The tables of ``[group.<name>]``, by name."""
    tables = data.get(group)
    return [(name, table) for name, table in tables.items() if isinstance(table, dict)] if isinstance(tables, dict) else []


def _expected(ctx: dict[str, Any]) -> list[str]:
    return re.findall(r"'([^']*)'", str(ctx.get("expected", "")))


def _said(err: Any) -> str:
    """What is wrong with one value, in the farm's words."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    given = f", not {shown(repr(value))}" if not isinstance(value, (dict, list)) else ""
    if kind == "value_error":
        return str(ctx.get("error", "is not valid"))
    if kind == "literal_error":
        choices = _expected(ctx)
        return f"{shown(repr(value))} is not one of {', '.join(choices)}{nearest(str(value), choices)}"
    words = {
        "greater_than_equal": f"must be at least {ctx.get('ge')}",
        "greater_than": f"must be more than {ctx.get('gt')}",
        "less_than_equal": f"must be at most {ctx.get('le')}",
        "less_than": f"must be less than {ctx.get('lt')}",
        "int_type": "must be a whole number",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "finite_number": "must be a finite number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be text (in quotes)",
        "dict_type": "must be a table",
        "model_type": "must be a table",
        "list_type": "must be an array",
    }
    if kind in words and not str(err.get("msg", "")).startswith("Input should"):
        return str(err["msg"])  # a check of the farm's own under pydantic's name (farm.config._finite)
    return words.get(kind, "is not a valid value") + given


def _where(loc: Path_) -> str:
    """``connectors.expense`` as TOML writes a table's name (quoted parts where needed)."""
    return ".".join(part if _BARE.fullmatch(part) else '"' + shown(part).replace('"', '\\"') + '"' for part in loc)


_ROLES = ("simulator", "validator", "generator", "reporter")


def _farm_references(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``[farm]``'s agents that name nothing: ``default_agent`` (which must be an agent to test, not
    a role), ``simulator``, ``validator`` and ``attributor``."""
    farm = data.get("farm")
    if not isinstance(farm, dict):
        return
    agents = dict(_tables_of(data, "agents"))
    for key in ("default_agent", "simulator", "validator", "attributor"):
        ref = farm.get(key)
        if not isinstance(ref, str) or not ref:
            continue
        if ref not in agents:
            known = ", ".join(sorted(agents)) or "none"
            yield key, f"key '{key}': agent '{shown(ref)}' is not configured{nearest(ref, agents)} (configured: {known})"
        elif key == "default_agent" and agents[ref].get("kind") in _ROLES:
            yield key, f"key '{key}': agent '{shown(ref)}' is a {agents[ref]['kind']}, a role the farm plays, not an agent to test"


def config_problems(name: str, text: str, data: dict[str, Any], model: type[BaseModel], tables: dict[str, frozenset[str]]) -> tuple[list[str], Any]:
    """Every problem of ``data`` (``text`` parsed) as ``name:LINE: ...`` lines, and the
    ``model`` it makes when there is none (None otherwise). ``tables`` are the keys each table may
    hold: ``top`` (the file's own), ``farm``, ``connector``, ``price``, ``agent`` and ``resources``."""
    lines = key_lines(text)
    data = copy.deepcopy(data)
    found: list[tuple[int, str]] = []
    suggested: set[Path_] = set()

    def add(path: Path_, message: str) -> None:
        line = _line(lines, path)
        found.append((line or 0, f"{name}:{line}: {message}" if line else f"{name}: {message}"))

    for table, path, key, known in list(_unknown(data, tables)):
        hint = nearest(key, known)
        if hint:
            suggested.add((*path, hint.split("'")[1]))
        add((*path, key), f"key '{shown(key)}': unknown key{hint}")
        del table[key]
    for agent_id, agent in _tables_of(data, "agents"):
        for key, group, what in (("connector", "connectors", "connector"), ("uses", "agents", "agent")):
            ref, names = agent.get(key), [name for name, _ in _tables_of(data, group)]
            if isinstance(ref, str) and ref and ref not in names:
                add(("agents", agent_id, key), f"key '{key}': {what} '{shown(ref)}' is not configured{nearest(ref, names)}")
    for key, message in _farm_references(data):
        add(("farm", key), message)
    try:
        made = model.model_validate(data)
    except ValidationError as exc:
        made = None
        for err in exc.errors():
            loc = tuple(str(part) for part in err["loc"])
            if err["type"] != "missing":
                add(loc, f"key '{shown(loc[-1])}': {_said(err)}")
            elif loc not in suggested:  # a misspelt key is said once, as unknown
                add(loc[:-1], f"key '{shown(loc[-1])}': required, and missing from [{_where(loc[:-1])}]")
    problems = [message for _, message in sorted(found, key=lambda item: item[0])]
    return problems, made if not problems else None


# -- a file that is not TOML ------------------------------------------------------------------

_TOML_AT = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)$")

_TOML_WORDS = {
    "Invalid statement": "a line that is neither key = value nor a [table] header",
    "Expected ']' at the end of a table declaration": "a [table] header is not closed with ]",
    "Expected ']]' at the end of an array declaration": "an [[array]] header is not closed with ]]",
    "Unclosed array": "an array [...] is not closed with ]",
    "Unclosed inline table": "an inline table { ... } is not closed with } on its line",
    "Expected '=' after a key in a key/value pair": "a key without '= value' (text goes in quotes: key = \"text\")",
    "Expected newline or end of document after a statement": "something follows the value on its line (one key = value a line; text goes in quotes)",
    "Unterminated string": "a multi-line string is not closed",
    "Unescaped '\\' in a string": "a backslash in a \"string\" begins an escape: write \\\\, or put the text in 'single quotes'",
    "Invalid hex value": "a \\u or \\U escape is not a number of hex digits",
    "Escaped character is not a Unicode scalar value": "a \\u or \\U escape names no character",
    "Invalid initial character for a key part": "a key begins with a character a bare key cannot hold (letters, digits, - and _; put other keys in quotes)",
    "Invalid date or datetime": "not a valid date or time",
}
"""``tomllib``'s messages, by their words, in the farm's; those that name the key are :func:`_toml_said`'s."""


def toml_problem(name: str, text: str, error: Exception) -> str:
    """``name:LINE:COL: not valid TOML: ...``: what ``tomllib`` refused in ``text`` (``error``, a
    ``TOMLDecodeError``), in the farm's words, naming the key or table when the line shows it."""
    message = str(error)
    found = _TOML_AT.search(message)
    said = message[: found.start()] if found else message
    if found is None or found[1] is None:
        return f"{name}: not valid TOML: {_toml_said(said, text, None, 0)} before the file ends"
    line, column = int(found[1]), int(found[2])
    return f"{name}:{line}:{column}: not valid TOML: {_toml_said(said, text, line, column)}"


def _toml_said(said: str, text: str, line: int | None, column: int) -> str:
    """``tomllib``'s ``said`` about ``line`` (from 1; None: the end of the file) at ``column``, in the farm's words."""
    lines = text.splitlines()
    written = lines[line - 1] if line and line <= len(lines) else ""
    table = _table_at(lines, line) if line else ()
    key = _key(written, 0) if line and not written.lstrip().startswith("[") else None
    named = f"key '{shown('.'.join(key[0]))}': " if key else ""
    if said in _TOML_WORDS:
        return _TOML_WORDS[said]
    if said.startswith(("Illegal character ", "Found invalid character ")):
        try:
            char = str(ast.literal_eval(said.split(" character ", 1)[1]))
        except (ValueError, SyntaxError):
            char = ""
        if char in ("\n", "\r", ""):
            return f"{named}a string is not closed on its line (end it with its quote)"
        return f"{named}a control character in a string: write it as the escape \\u{ord(char[0]):04x}"
    if said.startswith("Expected ") and said[len("Expected "):] in ("\"'\"", "'\"'"):
        return "a string is not closed"
    if said == "Invalid value":
        value = re.split(r"[\s,#\]}]", written[column - 1 :], maxsplit=1)[0] if written else ""
        if value.lower() in ("true", "false"):
            return f"{named}write {value.lower()} in lower case, as TOML does"
        if value and key and _BARE.fullmatch(value):
            return f"{named}{shown(value)} is not a TOML value; text goes in quotes: {shown(key[0][-1])} = \"{shown(value)}\""
        return f"{named}not a TOML value (text goes in quotes, \"like this\")" if value else f"{named}no value after '='"
    before = key_lines("\n".join(lines[: line - 1])) if line else {}
    header = _header_of(written)
    if said.startswith("Cannot declare ") and said.endswith(" twice"):
        try:
            header = tuple(str(part) for part in ast.literal_eval(said[len("Cannot declare ") : -len(" twice")]))
        except (ValueError, SyntaxError):
            pass
        said = "Cannot overwrite a value"
    if said == "Cannot overwrite a value" and header:
        first = f" (first at line {before[header]})" if header in before else ""
        return f"table [{_where(header)}] is declared twice{first}; write its keys under one header"
    if said == "Cannot overwrite a value" and key:
        path = table + tuple(key[0])
        first = f" (first at line {before[path]})" if path in before else ""
        inside = f" in [{_where(table)}]" if table else ""
        return f"key '{shown('.'.join(key[0]))}' is given twice{inside}{first}; keep one"
    if said.startswith("Duplicate inline table key "):
        return f"key {said[len('Duplicate inline table key ') :]} is given twice in one inline table {{ ... }}"
    if said.startswith(("Cannot mutate immutable namespace", "Cannot redefine namespace")):
        return f"{named}a table written whole (an inline {{ ... }} or a [table]) is added to again; write each table in one place"
    return f"{named}not TOML as written"


def _header_of(written: str) -> Path_ | None:
    """The table a ``[header]`` or ``[[header]]`` line names; None for any other line."""
    header = _HEADER.match(written) if written.lstrip().startswith("[") else None
    found = _key(header[1], 0) if header else None
    return tuple(found[0]) if found else None


def _table_at(lines: list[str], line: int) -> Path_:
    """The table that ``line`` (from 1) of ``lines`` is in: the last ``[header]`` above it."""
    for written in reversed(lines[: line - 1]):
        header = _header_of(written)
        if header is not None:
            return header
    return ()
