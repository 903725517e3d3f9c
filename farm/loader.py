"""Loading suites: JSONL and JSON files, a direct message, or JSONL on stdin (SPEC 3.1).

Two kinds of bad input, treated differently:

- a line that is not JSON at all stops the load before anything runs:
  :class:`~farm.errors.InputError` lists every such line as ``file:line: problem``;
- a case that parses but breaks a rule (unknown assertion type, invalid mode
  mix, missing or duplicate ``id``, a wrong field) becomes a :class:`LoadedCase`
  with ``error`` set: the run reports it as an ``error`` result and the rest of
  the suite runs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, TextIO

from pydantic import ValidationError

from farm.assertions import known_types
from farm.cases import CaseRuleError, TestCase
from farm.errors import InputError, UsageError

__all__ = ["LoadedCase", "Suite", "load_file", "load_text", "load_message", "parse_cases", "describe_validation_error"]

FILE_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class LoadedCase:
    """A case as loaded: either a valid ``case``, or an ``error`` that says what is wrong."""

    id: str
    source: str
    """``file:line`` (or ``<message>``, ``<stdin>:line``)."""
    case: TestCase | None = None
    error: str | None = None
    raw: Any = None
    """The JSON as written, kept only for a case that did not load."""
    base_dir: str | None = None
    """The test file's folder: ``file://`` attachments resolve against it."""
    script: str | None = None
    """``module:function`` for a script test (``-i scripts.<module>``)."""
    data: bytes | None = None
    """A valid case as compact JSON, instead of ``case`` (see :meth:`compact`)."""
    needs: tuple[bool, bool] = (False, False)
    """Whether the case needs a simulator, and a validator (an ``agent`` assertion)."""

    @property
    def ok(self) -> bool:
        return self.error is None and (self.case is not None or self.data is not None)

    def compact(self) -> "LoadedCase":
        """This case holding its JSON (~10x smaller) instead of the validated model, for
        suites of 100k cases in the driver; :meth:`materialized` validates it again."""
        if self.case is None:
            return self
        data = self.case.model_dump_json(exclude_defaults=True).encode()
        return LoadedCase(self.id, self.source, None, self.error, self.raw, self.base_dir, self.script, data, self.needs)

    def materialized(self) -> "LoadedCase":
        """This case with its validated model (the case itself when it has it)."""
        if self.case is not None or self.data is None:
            return self
        case = TestCase.model_validate_json(self.data)
        return LoadedCase(self.id, self.source, case, self.error, self.raw, self.base_dir, self.script, None, self.needs)


@dataclass
class Suite:
    cases: list[LoadedCase] = field(default_factory=list)
    description: str = ""

    @property
    def problems(self) -> list[str]:
        return [f"{c.source}: {c.error}" for c in self.cases if c.error]

    def select(self, pattern: str | None = None, tags: Iterable[str] = ()) -> "Suite":
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
        return Suite(kept, self.description)


def describe_validation_error(exc: ValidationError) -> str:
    """One sentence for the first problem pydantic found, naming the field."""
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"field '{loc}': {msg}" if loc else msg)
    more = f" (and {len(exc.errors()) - 3} more)" if len(exc.errors()) > 3 else ""
    return "; ".join(parts) + more


def parse_cases(items: Iterable[tuple[str, Any]], base_dir: str | None = None, compact: bool = False) -> list[LoadedCase]:
    """Validate raw case objects; ``items`` are ``(source, object)`` pairs.

    ``compact``: keep each valid case as JSON rather than as its model, so that a
    suite of 100k cases stays small in the driver (see :meth:`LoadedCase.compact`).
    """
    known = known_types()
    seen: dict[str, str] = {}
    out: list[LoadedCase] = []
    for source, raw in items:
        loaded = _parse_one(source, raw, known, seen, base_dir)
        out.append(loaded.compact() if compact else loaded)
    return out


def _parse_one(source: str, raw: Any, known: set[str], seen: dict[str, str], base_dir: str | None) -> LoadedCase:
    if not isinstance(raw, dict):
        return LoadedCase(id=source, source=source, error="a case must be a JSON object", raw=raw, base_dir=base_dir)
    raw_id = raw.get("id")
    case_id = str(raw_id) if raw_id not in (None, "") else source
    loaded = LoadedCase(id=case_id, source=source, raw=raw, base_dir=base_dir)
    if raw_id in (None, ""):
        loaded.error = "field 'id': required field is missing"
        return loaded
    if case_id in seen:
        loaded.id = f"{case_id}@{source}"
        loaded.error = f"duplicate id '{case_id}' (first at {seen[case_id]})"
        return loaded
    seen[case_id] = source
    try:
        case = TestCase.model_validate(raw)
        case.check_rules(known)
    except ValidationError as exc:
        loaded.error = describe_validation_error(exc)
        return loaded
    except CaseRuleError as exc:
        loaded.error = str(exc)
        return loaded
    loaded.case = case
    loaded.needs = (case.simulator is not None, any(spec.type == "agent" for spec in case.all_assertions()))
    loaded.raw = None  # the model is enough once valid: a 100k-case suite stays small
    return loaded


def load_text(text: str, name: str, base_dir: str | None = None, compact: bool = False) -> Suite:
    """JSONL text: one case per line; blank lines and ``//`` comments are ignored."""
    items: list[tuple[str, Any]] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        try:
            items.append((f"{name}:{number}", json.loads(stripped)))
        except json.JSONDecodeError as exc:
            problems.append(f"{name}:{number}: not valid JSON: {exc.msg} (column {exc.colno})")
    if problems:
        raise InputError(problems)
    return Suite(parse_cases(items, base_dir, compact), name)


def _json_items(text: str, name: str) -> list[tuple[str, Any]]:
    """Cases of a ``.json`` file with the line each starts on."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError([f"{name}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno})"]) from None
    if isinstance(data, dict) and "cases" in data:
        if not isinstance(data["cases"], list):
            raise InputError([f"{name}:1: field 'cases' must be an array of cases"])
        array_start = text.index("[", text.index('"cases"'))
        return _array_items(text, array_start, data["cases"], name)
    if isinstance(data, list):
        return _array_items(text, text.index("["), data, name)
    return [(f"{name}:{text[: len(text) - len(text.lstrip())].count(chr(10)) + 1}", data)]


def _array_items(text: str, start: int, values: list[Any], name: str) -> list[tuple[str, Any]]:
    decoder = json.JSONDecoder()
    pos = start + 1
    out = []
    for value in values:
        while text[pos] in " \t\r\n,":
            pos += 1
        line = text.count("\n", 0, pos) + 1
        _, pos = decoder.raw_decode(text, pos)
        out.append((f"{name}:{line}", value))
    return out


def load_file(path: Path, display: str | None = None, compact: bool = False) -> Suite:
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
        return Suite(parse_cases(_json_items(text, name), base_dir, compact), name)
    return load_text(text, name, base_dir, compact)


def load_stdin(stream: TextIO, compact: bool = False) -> Suite:
    return load_text(stream.read(), "<stdin>", str(Path.cwd()), compact)


def load_message(message: str) -> Suite:
    """A direct message: one single-turn case with no assertions."""
    raw = {"id": "message", "name": message[:60], "input": message}
    return Suite(parse_cases([("<message>", raw)], str(Path.cwd())), "message")


def looks_like_file(value: str) -> bool:
    return value.endswith(FILE_SUFFIXES) or Path(value).is_file()
