"""Loading suites: JSONL and JSON files, a direct message, or JSONL on stdin (docs/reference/cases.md).

Two kinds of bad input, treated differently:

- a ``.json`` file that is not JSON stops its load before anything runs: an
  :class:`~farm.errors.InputError` says ``file:line: not valid JSON: ...``;
- a JSONL line that is not JSON, or a case that parses but breaks a rule (unknown assertion type, invalid mode
  mix, missing or duplicate ``id``, a wrong field) becomes a :class:`~farm.loaded.LoadedCase`
  with ``error`` set: the run reports it as an ``error`` result and the rest of
  the suite runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError

from farm.assertions import known_types
from farm.assertions.traces import PARAMS as TRACE_PARAMS
from farm.cases import TestCase
from farm.errors import InputError, UsageError
from farm.feed import CLOSED, CaseFeed
from farm.loaded import LoadedCase
from farm.suite.validation import (
    TooLargeInteger,
    case_problems,
    every_assertion,
    known_only,
    mode_typo,
    raw_problems,
    rule_problems,
    schema_problems,
    without_failing_fields,
)
from farm.wording import nearest, nearest_name, shown

__all__ = ["MESSAGE", "SMALL_SUITE", "Suite", "load_file", "load_text", "load_message", "parse_cases", "describe_validation_error", "json_problem"]

FILE_SUFFIXES = (".jsonl", ".json", ".ndjson")

MESSAGE = "message"
"""The description of a suite that is one direct message (``-i "Hello"``)."""

SMALL_SUITE = 2000
"""The most cases a suite loaded ``compact`` keeps as validated models (``small``): each is then
validated once, not again when it is checked and when it starts, for ~3 KiB a simple case
(~6 MiB at 2000) and up to ~30 KiB one of ten turns with three assertions each."""


@dataclass
class Suite:
    cases: list[LoadedCase] = field(default_factory=list)
    description: str = ""
    feed: CaseFeed = CLOSED
    """What hands over the cases that arrive while the run goes: none for a static suite
    (:data:`~farm.feed.CLOSED`), a generator's (``-i agents:``/``scripts:``,
    :class:`~farm.generation.feed.GeneratedFeed`), whose ``cases`` start empty."""
    notes: list[str] = field(default_factory=list)
    """What the inputs left out that a user may have meant to run (said first among the warnings)."""

    @property
    def expected(self) -> int:
        """Cases the run counts on: those there, or as many as its feed is asked for."""
        return max(len(self.cases), self.feed.asked)

    @property
    def problems(self) -> list[str]:
        """Every problem of every case, one line each: ``file:line: field 'where': what is wrong``."""
        return [f"{shown(c.source)}: {problem}" for c in self.cases if c.error for problem in (c.problems or [c.error])]

    @property
    def warnings(self) -> list[str]:
        return [*self.notes, *(f"{c.source}: {w}" for c in self.cases for w in c.warnings)]

    def select(self, pattern: str | None = None, tags: Iterable[str] = ()) -> Suite:
        """Only the cases whose id matches ``pattern`` (``re.search``) and that carry every tag."""
        wanted = set(tags)
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error as exc:
            raise UsageError(f"--run: '{pattern}' is not a valid regular expression: {exc}") from None
        kept = []
        for c in self.cases:
            if regex and not regex.search(c.id):
                continue
            case = c.materialized().case if wanted else None
            if wanted and (case is None or not wanted.issubset(case.tags)):
                continue
            kept.append(c)
        return Suite(kept, self.description, self.feed, self.notes)


def describe_validation_error(exc: ValidationError) -> str:
    """One sentence for the first problems pydantic found, naming the fields."""
    parts = schema_problems(exc)
    more = f" (and {len(parts) - 3} more)" if len(parts) > 3 else ""
    return "; ".join(parts[:3]) + more


def parse_cases(items: Iterable[tuple[str, Any]], base_dir: str | None = None, compact: bool = False, small: int = 0) -> list[LoadedCase]:
    """Validate raw case objects; ``items`` are ``(source, object)`` pairs.

    ``compact``: keep each valid case as JSON rather than as its model, so that a
    suite of 100k cases stays small in the driver (see :meth:`LoadedCase.compact`),
    unless the suite has at most ``small`` cases (see :data:`SMALL_SUITE`).
    """
    known = known_types()
    seen: dict[str, str] = {}
    out: list[LoadedCase] = []
    for source, raw in items:
        loaded = _parse_one(source, raw, known, seen, base_dir)
        if compact and len(out) == small:  # no longer small: the models kept so far become JSON too
            out = [kept.compact() for kept in out]
        out.append(loaded.compact() if compact and len(out) >= small else loaded)
    return out


def _parse_one(source: str, raw: Any, known: set[str], seen: dict[str, str], base_dir: str | None) -> LoadedCase:
    if isinstance(raw, _Unparsed):
        loaded = LoadedCase(id=source, source=source, base_dir=base_dir)
        loaded.fail([raw.problem])
        return loaded
    if not isinstance(raw, dict):
        loaded = LoadedCase(id=source, source=source, raw=raw, base_dir=base_dir)
        loaded.fail(["a case must be a JSON object"])
        return loaded
    raw_id = raw.get("id")
    case_id = _id_text(raw_id) if raw_id not in (None, "") else source
    loaded = LoadedCase(id=case_id, source=source, raw=raw, base_dir=base_dir)
    problems: list[str] = []
    if case_id in seen:  # (a missing or empty id: the model says which)
        loaded.id = f"{case_id}@{source}"
        problems.append(f"field 'id': duplicate id '{shown(case_id)}' (first at {shown(seen[case_id])})")
    elif raw_id not in (None, ""):
        seen[case_id] = source
    found = raw_problems(raw)
    if found and not any("unknown field" in p for p in found):  # out of bounds: nothing more can be read safely
        loaded.fail(problems + found)
        return loaded
    problems += found
    case, whole = _model(known_only(raw) if found else raw, problems)
    assertions = every_assertion(case) if case is not None else []
    if case is not None:
        modes = whole and not (found and mode_typo(raw))
        problems += rule_problems(case, known, modes=modes, assertions=assertions)
        problems += case_problems(case, assertions)
    if problems:
        loaded.fail(problems)
        loaded.partial = case if whole else None  # config checks on a case with fields left out would guess
        return loaded
    assert case is not None
    if raw.get("expected") is not None and case.expected is None:
        loaded.warnings.append("field 'expected': ignored, because the case has assertions (they win); keep one of the two")
    loaded.case = case
    judged = any(spec.type == "agent" for _, spec in assertions) or (case.golden is not None and case.golden.text == "judge")
    loaded.needs = (case.simulator is not None or case.checkpoints is not None, judged)
    loaded.traced = any(spec.type in TRACE_PARAMS for _, spec in assertions)
    loaded.raw = None  # the model is enough once valid: a 100k-case suite stays small
    return loaded


def _model(data: dict[str, Any], problems: list[str]) -> tuple[TestCase | None, bool]:
    """The case model of ``data``, and whether it holds every field the case wrote that the farm
    knows. A field the model refuses is a problem (added to ``problems``) and is left out, once,
    so that the rest of the case is still checked."""
    try:
        return TestCase.model_validate(data), True
    except ValidationError as exc:
        problems += schema_problems(exc)
        rest = without_failing_fields(data, exc)
    except RecursionError:
        problems.append("the case is nested too deeply to read")
        return None, False
    if rest is None or not isinstance(rest.get("id", ""), (str, int, float)):
        return None, False
    try:
        return TestCase.model_validate({"id": "?", **rest}), False
    except (ValidationError, RecursionError):
        return None, False


def _id_text(raw_id: Any) -> str:
    text = raw_id if isinstance(raw_id, str) else json.dumps(raw_id, default=repr) if not isinstance(raw_id, TooLargeInteger) else repr(raw_id)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _big_int(digits: str) -> Any:
    """JSON integers as Python ints, except those Python refuses (over 4,300 digits)."""
    try:
        return int(digits)
    except ValueError:
        return TooLargeInteger(len(digits.lstrip("-")))


class _DuplicateKey(ValueError):
    """An object of a case gives one key twice: JSON would keep the last silently (an assertion
    list given twice would drop the first)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.problem = f"the key '{shown(key)}' is given twice in one object (only the last would be read)"


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


_DECODER = json.JSONDecoder(parse_int=_big_int, object_pairs_hook=_pairs)
_SYNTAX = json.JSONDecoder(parse_int=_big_int)
"""Reads a whole ``.json`` suite for its syntax: a key given twice is said of its case, at its line."""
_WS = " \t\r\n"
"""JSON's whitespace: U+2028, U+2029 and U+0085 are not, and may sit raw inside a string."""


def _decode(text: str, pos: int = 0, decoder: json.JSONDecoder = _DECODER) -> tuple[Any, int]:
    """``raw_decode`` whose every failure is a ``json.JSONDecodeError`` (or a :class:`_DuplicateKey`)."""
    try:
        return decoder.raw_decode(text, pos)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply to read", text, pos) from None


def _loads(text: str, decoder: json.JSONDecoder = _DECODER) -> Any:
    start = len(text) - len(text.lstrip(_WS))
    value, end = _decode(text, start, decoder)
    rest = len(text) - len(text[end:].lstrip(_WS))
    if rest != len(text):
        raise json.JSONDecodeError("Extra data", text, rest)
    return value


def _column(doc: str, pos: int) -> int:
    return pos - doc.rfind("\n", 0, pos)


def _before(doc: str, pos: int) -> int:
    """Where the last character before ``pos`` that is not whitespace is (-1: none)."""
    end = len(doc[:pos].rstrip(_WS))
    return end - 1


def json_problem(exc: json.JSONDecodeError, shift: int = 0, jsonl: bool = True) -> tuple[int, str]:
    """What is wrong with JSON text, in the farm's words (json's own are Python's: ``Extra data``),
    naming the column, and where in the text that is (a trailing comma is before the error json
    found). ``shift``: columns the text was cut from the start of its line; ``jsonl``: the text is
    one line of a JSONL file, not a whole ``.json`` file."""
    doc, pos, msg = exc.doc, exc.pos, exc.msg
    whole = "object" if doc.lstrip(_WS).startswith("{") else "array" if doc.lstrip(_WS).startswith("[") else "value"

    def said(where: int, what: str) -> tuple[int, str]:
        return where, "not valid JSON: " + what.replace("{at}", f"column {_column(doc, where) + shift}")

    char = doc[pos] if pos < len(doc) else ""
    comma = _before(doc, pos)
    if msg == "Extra data":
        if doc[pos:].strip(_WS) == ",":
            return said(pos, "a trailing comma at {at}" + (" (a line holds one case, with nothing after it)" if jsonl else ""))
        return said(pos, f"something follows the {whole} at {{at}}" + (" (a line holds one case)" if jsonl else " (a .json file holds one array or object)"))
    if char and char in "}]" and comma >= 0 and doc[comma] == ",":
        return said(comma, f"a trailing comma at {{at}} (JSON allows none before '{char}')")
    if char == "'" and msg.startswith(("Expecting value", "Expecting property name")):
        return said(pos, "a single quote at {at} (JSON strings and keys take double quotes)")
    if pos >= len(doc.rstrip(_WS)) and msg.startswith("Expecting"):
        return said(pos, f"the text ends at {{at}} before the {whole} is closed")
    words = {
        "Expecting value": "a value (text in double quotes, a number, true, false, null, an object or an array) is expected",
        "Expecting property name enclosed in double quotes": "a key in double quotes is expected",
        "Expecting ',' delimiter": "a comma (or the closing bracket) is expected",
        "Expecting ':' delimiter": "a colon after the key is expected",
        "Unterminated string starting at": "a string that starts here is not closed",
        "Invalid control character at": "a raw control character (a tab or line break) inside a string at {at}; write it escaped (\\t, \\n)",
        "Invalid \\escape": "an unknown escape inside a string",
        "Invalid \\uXXXX escape": "an invalid \\u escape inside a string",
        "nested too deeply to read": "nested too deeply to read at {at}",
    }
    what = words.get(msg, msg[:1].lower() + msg[1:])
    return said(pos, what if "{at}" in what else what + " at {at}")


class _Unparsed:
    """A JSONL line that is not JSON: a case of its own whose one problem is that."""

    def __init__(self, problem: str):
        self.problem = problem


def load_text(text: str, name: str, base_dir: str | None = None, compact: bool = False, small: int = 0) -> Suite:
    """JSONL text: one case per line; blank lines and ``//`` comments are ignored.

    Lines end only at ``\n`` (``\r\n`` too): a raw U+2028 inside a string is valid JSON.
    A line that is not JSON is a case with that one problem: the other lines are still loaded
    and checked, so that every problem of the file is said at once.
    """
    items: list[tuple[str, Any]] = []
    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        stripped = line.strip(_WS)
        if not stripped or stripped.startswith("//"):
            continue
        try:
            items.append((f"{name}:{number}", _loads(stripped)))
        except json.JSONDecodeError as exc:
            items.append((f"{name}:{number}", _Unparsed(json_problem(exc, len(line) - len(line.lstrip(_WS)))[1])))
        except _DuplicateKey as exc:
            items.append((f"{name}:{number}", _Unparsed(exc.problem)))
    return Suite(parse_cases(items, base_dir, compact, small), name)


def _json_items(text: str, name: str) -> list[tuple[str, Any]]:
    """Cases of a ``.json`` file with the line each starts on."""
    text = text.removeprefix("\ufeff")

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    try:
        _loads(text, _SYNTAX)
    except json.JSONDecodeError as exc:
        where, problem = json_problem(exc, jsonl=False)
        raise InputError([f"{name}:{line_of(where)}: {problem}"]) from None
    start = len(text) - len(text.lstrip(_WS))
    if text.startswith("[", start):
        return [(f"{name}:{line_of(pos)}", value) for pos, value in _array_members(text, start)]
    if text.startswith("{", start):
        members = _object_members(text, start, _SYNTAX)
        keys = [key for key, _, _ in members]
        cases = [(pos, value) for key, pos, value in members if key == "cases"]
        if len(cases) > 1:
            raise InputError([f"{name}:{line_of(cases[1][0])}: field 'cases' is given twice"])
        if cases:
            pos, value = cases[0]
            if not isinstance(value, list):
                raise InputError([f"{name}:{line_of(pos)}: field 'cases' must be an array of cases"])
            if others := [(key, p) for key, p, _ in members if key != "cases"]:
                key, p = others[0]
                raise InputError([f"{name}:{line_of(p)}: field '{shown(key)}': unknown field of a suite{nearest(key, ['cases'])} (a .json suite is {{\"cases\": [...]}}, each case's fields its own)"])
            return [(f"{name}:{line_of(p)}", v) for p, v in _array_members(text, pos)]
        if len(keys) == 1 and isinstance(members[0][2], list) and nearest_name(keys[0], ["cases"]):
            raise InputError([f"{name}:{line_of(members[0][1])}: field '{shown(keys[0])}': unknown field (did you mean 'cases'?)"])
        return [(f"{name}:{line_of(start)}", _member(text, start))]
    return [(f"{name}:{line_of(start)}", _member(text, start))]


def _member(text: str, pos: int) -> Any:
    """The case at ``pos`` of a ``.json`` suite, or a stand-in whose one problem is a key given twice."""
    try:
        return _decode(text, pos)[0]
    except _DuplicateKey as exc:
        return _Unparsed(exc.problem)


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _array_members(text: str, start: int) -> list[tuple[int, Any]]:
    """``(position, value)`` of each element of the (valid) array at ``start``."""
    out = []
    pos = _skip(text, start + 1)
    while text[pos] != "]":
        end = _decode(text, pos, _SYNTAX)[1]
        out.append((pos, _member(text, pos)))
        pos = _skip(text, end)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
    return out


def _object_members(text: str, start: int, decoder: json.JSONDecoder = _DECODER) -> list[tuple[str, int, Any]]:
    """``(key, value position, value)`` of each member of the (valid) object at ``start``,
    keys decoded (``"\\u0063ases"`` is ``cases``) and duplicates kept."""
    out = []
    pos = _skip(text, start + 1)
    while text[pos] != "}":
        key, end = _decode(text, pos, decoder)
        pos = _skip(text, _skip(text, end) + 1)  # past the colon
        value, end = _decode(text, pos, decoder)
        out.append((key, pos, value))
        pos = _skip(text, end)
        if text[pos] == ",":
            pos = _skip(text, pos + 1)
    return out


def load_file(path: Path, display: str | None = None, compact: bool = False, small: int = 0) -> Suite:
    """A ``.jsonl`` (one case per line) or ``.json`` file (a case, an array, or ``{"cases": [...]}``)."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{name}: file not found") from None
    except UnicodeDecodeError:
        raise InputError([f"{name}:1: not UTF-8 text"]) from None
    except OSError as exc:
        raise UsageError(f"{name}: cannot be read: {exc.strerror}") from None
    base_dir = str(path.resolve().parent)
    if path.suffix == ".json":
        return Suite(parse_cases(_json_items(text, name), base_dir, compact, small), name)
    return load_text(text, name, base_dir, compact, small)


def load_stdin(stream: TextIO, compact: bool = False, small: int = 0) -> Suite:
    return load_text(stream.read(), "<stdin>", str(Path.cwd()), compact, small)


def load_message(message: str) -> Suite:
    """A direct message: one single-turn case with no assertions."""
    raw = {"id": "message", "name": message[:60], "input": message}
    return Suite(parse_cases([("<message>", raw)], str(Path.cwd())), MESSAGE)
