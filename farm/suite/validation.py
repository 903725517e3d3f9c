"""Deep checks of a suite: everything that can be known wrong before any agent is called.

Two layers, each a plain function (a third, the checks of a loaded suite against the config,
is :mod:`farm.suite.checks`):

- :func:`raw_problems` looks at a case as written (the parsed JSON): every field
  at every depth must be known (an unknown one names the nearest known name),
  strings must be valid Unicode, integers and nesting must stay in bounds;
  :func:`known_only` is the case without its unknown fields, so that the
  checks below still see the rest;
- :func:`schema_problems` turns every error of the case model into a problem,
  :func:`rule_problems` checks what the model cannot state (assertion types,
  the mode's fields), and :func:`case_problems` looks at a valid
  :class:`~farm.cases.TestCase`: regex (compiled by the engine the run uses) and
  JSONPath syntax, JSON type names, the values each assertion needs (none empty where an empty
  one would match every reply, or none), and checkpoint dependencies (no cycle, none on itself).

Every problem of a case is reported, one each, reading ``field 'where': what is
wrong``; the loader prefixes ``file:line``. Names and values echoed from the input
are shown with line breaks and control characters escaped (:func:`farm.wording.shown`), so each
problem stays one line.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from farm.assertions.registry import checkers, fields_of
from farm.assertions.traces import PARAMS as TRACE_PARAMS
from farm.assertions.traces import params_errors
from farm.cases import CaseRuleError, Checkpoint, Interactive, Mode, Options, SimulatorSpec, TestCase, Turn
from farm.jsonpaths import parse_path
from farm.wording import nearest, nearest_name, shown

if TYPE_CHECKING:
    from farm.cases import AssertionSpec, TestCase

__all__ = [
    "MAX_DEPTH",
    "MAX_LATENCY_MS",
    "MAX_TURNS",
    "JSON_TYPE_NAMES",
    "TooLargeInteger",
    "raw_problems",
    "known_only",
    "mode_typo",
    "schema_problems",
    "field_path",
    "without_failing_fields",
    "rule_problems",
    "case_problems",
    "every_assertion",
    "assertion_problems",
]

MAX_DEPTH = 64
"""How deeply a case may nest (objects and arrays); far beyond any real suite."""

MAX_TURNS = 10_000
"""The most turns a case may script: the bound of ``max_turns``."""

MAX_LATENCY_MS = 86_400_000
"""The largest ``latency`` bound a case may give: a day, beyond any turn timeout."""

JSON_TYPE_NAMES = ("string", "number", "boolean", "array", "object", "null")

CASE_FIELDS = frozenset({*TestCase.model_fields, *TestCase.other_spellings})
TURN_FIELDS = frozenset({*Turn.model_fields, *Turn.other_spellings})
SIMULATOR_FIELDS = frozenset({*SimulatorSpec.model_fields, *SimulatorSpec.other_spellings})
CHECKPOINT_FIELDS = frozenset({*Checkpoint.model_fields, *Checkpoint.other_spellings})
OPTIONS_FIELDS = frozenset(Options.model_fields)
INTERACTIVE_FIELDS = frozenset(Interactive.model_fields)
ASSERTION_COMMON = frozenset({"type", "negate", "message", "options"})
ASSERTION_FIELDS: dict[str, frozenset[str]] = {kind: frozenset(fields_of(kind)) for kind in checkers()}
"""Each assertion type's own keys, as it registered them (:func:`farm.assertions.registry.assertion`)."""
_ASSERTION_KNOWN = {kind: ASSERTION_COMMON | fields for kind, fields in ASSERTION_FIELDS.items()}


class TooLargeInteger:
    """Stands in for a JSON integer longer than Python converts (4,300 digits)."""

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


_MODELS = (TestCase, Turn, SimulatorSpec, Checkpoint)
_SPELLINGS = frozenset(name for model in _MODELS for name in model.other_spellings) - {name for model in _MODELS for name in model.model_fields}
"""Other spellings a field is read by and no field's own name (``assert``): a typo is pointed to a field's own name first."""


def _unknown(where: str, key: str, known: Iterable[str]) -> str:
    own = [name for name in known if name not in _SPELLINGS]
    return f"field '{where}{shown(key)}': unknown field{nearest(key, own) or nearest(key, known)}"


# -- the case as written ---------------------------------------------------------------

Unknown = Callable[[dict[str, Any], str, str, frozenset[str]], None]
"""Told of each unknown field: the object holding it, the key, where the object is, the known keys."""


def raw_problems(raw: dict[str, Any]) -> list[str]:
    """Problems of a case as written: bounds and Unicode at any depth, then unknown fields."""
    turns = raw.get("turns")
    if isinstance(turns, list) and len(turns) > MAX_TURNS:
        return [f"field 'turns': {len(turns)} turns, more than the {MAX_TURNS} a case may have (the bound of max_turns)"]
    problems = _bounds(raw)
    if problems:
        return problems  # nothing further can be read safely
    out: list[str] = []
    _walk_fields(raw, lambda data, key, where, known: out.append(_unknown(where, key, known)))
    return out


MODE_FIELDS = frozenset({"input", "turns", "checkpoints", "simulator"})
"""The fields whose presence makes a case single-turn, static or dynamic."""


def mode_typo(raw: dict[str, Any]) -> bool:
    """Whether an unknown field of the case is a misspelling of a field that sets its mode
    (``checkpoint`` for ``checkpoints``): what its mode then lacks follows from the typo, and is not
    said as a second mistake that points at the wrong fix."""
    return any(key not in CASE_FIELDS and nearest_name(key, CASE_FIELDS) in MODE_FIELDS for key in raw)


def known_only(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` (already within :func:`raw_problems`' bounds) without its unknown fields."""
    cleaned = copy.deepcopy(raw)
    found: list[tuple[dict[str, Any], str]] = []
    _walk_fields(cleaned, lambda data, key, where, known: found.append((data, key)))
    for data, key in found:
        data.pop(key, None)
    return cleaned


def _walk_fields(raw: dict[str, Any], unknown: Unknown) -> None:
    """Every field of the case at every depth the farm reads; ``unknown`` is told of those it does not know."""
    _fields(raw, CASE_FIELDS, "", unknown)
    _options(raw.get("options"), "options", unknown)
    if isinstance(raw.get("interactive"), dict):
        _fields(raw["interactive"], INTERACTIVE_FIELDS, "interactive.", unknown)
    for key in ("assertions", "assert", "final_assertions"):
        if key in raw:
            _assertions(raw[key], key, unknown)
    turns = raw.get("turns")
    if isinstance(turns, list):
        for i, turn in enumerate(turns):
            if isinstance(turn, dict):
                where = f"turns[{i}]"
                _fields(turn, TURN_FIELDS, where + ".", unknown)
                _options(turn.get("options"), where + ".options", unknown)
                for key in ("assertions", "assert"):
                    _assertions(turn.get(key), f"{where}.{key}", unknown)
    sim = raw.get("simulator")
    if isinstance(sim, dict):
        _fields(sim, SIMULATOR_FIELDS, "simulator.", unknown)
        _options(sim.get("options"), "simulator.options", unknown)
    checkpoints = raw.get("checkpoints")
    if isinstance(checkpoints, list):
        for i, cp in enumerate(checkpoints):
            if isinstance(cp, dict):
                where = f"checkpoints[{i}]"
                _fields(cp, CHECKPOINT_FIELDS, where + ".", unknown)
                for key in ("assertion", "assert"):
                    _assertions(cp.get(key), f"{where}.{key}", unknown)


def _bounds(raw: dict[str, Any]) -> list[str]:
    """Depth, integer size and lone surrogates, checked without recursion: first without naming
    where (almost every case is within them), then again to say where when one is not."""
    if _within(raw):
        return []
    stack: list[tuple[Any, str, int]] = [(raw, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        label = f"field '{where}'" if where else "the case"
        if depth > MAX_DEPTH:
            return [f"{label}: nested more than {MAX_DEPTH} levels deep"]
        if isinstance(value, TooLargeInteger):
            return [f"{label}: an integer of {value.digits} digits is too large (at most 4300)"]
        if isinstance(value, str):
            if _has_surrogate(value):
                return [f"{label}: holds a lone surrogate (such as \\ud800), which is not valid Unicode text"]
        elif isinstance(value, dict):
            for key, item in value.items():
                if _has_surrogate(key):
                    return [f"{label}: a key holds a lone surrogate (such as \\ud800), which is not valid Unicode text"]
                stack.append((item, f"{where}.{key}" if where else key, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value))
    return []


def _within(raw: dict[str, Any]) -> bool:
    """Whether :func:`_bounds` finds nothing; quicker, as it builds no path to name."""
    stack: list[tuple[Any, int]] = [(raw, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            for key in value:
                if not key.isascii() and _has_surrogate(key):
                    return False
            value = value.values()
        if value and depth >= MAX_DEPTH:  # its items are deeper than the bound
            return False
        for item in value:
            if isinstance(item, str):
                if not item.isascii() and _has_surrogate(item):
                    return False
            elif isinstance(item, (dict, list)):
                stack.append((item, depth + 1))
            elif isinstance(item, TooLargeInteger):
                return False
    return True


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _fields(data: dict[str, Any], known: frozenset[str], where: str, unknown: Unknown) -> None:
    if known.issuperset(data):
        return
    for key in list(data):
        if key not in known:
            unknown(data, key, where, known)


def _options(value: Any, where: str, unknown: Unknown) -> None:
    if isinstance(value, dict):
        _fields(value, OPTIONS_FIELDS, where + ".", unknown)
        skip = value.get("skip")
        if isinstance(skip, dict):
            _fields(skip, frozenset({"history", "trace"}), where + ".skip.", unknown)


def _assertions(value: Any, where: str, unknown: Unknown) -> None:
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "equals" if "value" in item else None)
        known = _ASSERTION_KNOWN.get(kind) if isinstance(kind, str) else None
        if known is None:
            continue  # an unknown or missing type is reported by the rules, naming the known ones
        if known.issuperset(item) and not isinstance(item.get("options"), dict):
            continue  # the common case: nothing to name, so no path built
        here = f"{where}[{i}]" if isinstance(value, list) else where
        _fields(item, known, here + ".", unknown)
        _options(item.get("options"), here + ".options", unknown)


# -- the case model --------------------------------------------------------------------------


def schema_problems(exc: ValidationError) -> list[str]:
    """Every error of the case model, one problem each, naming its field as the other checks do
    (``assertions[0].negate``) and saying what is wrong in the farm's words, not pydantic's."""
    out = []
    for err in exc.errors():
        loc = field_path(err["loc"])
        msg = shown(_plain(err))
        out.append(f"field '{loc}': {msg}" if loc else msg)
    return out


def field_path(loc: Iterable[Any]) -> str:
    """``('assertions', 0, 'negate')`` as the farm names a field: ``assertions[0].negate``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not str(part).startswith("function-"):  # a validator's own step, not a field
            path += f".{shown(str(part))}" if path else shown(str(part))
    return path


_WHAT_IT_IS_NOT = {
    "bool_type": "is not true or false",
    "bool_parsing": "is not true or false",
    "int_type": "is not a whole number",
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "float_type": "is not a number",
    "float_parsing": "is not a number",
    "finite_number": "is not a finite number",
    "string_type": "is not text (a string in double quotes)",
    "list_type": "is not a list (an array: [...])",
    "tuple_type": "is not a list (an array: [...])",
    "set_type": "is not a list (an array: [...])",
    "dict_type": "is not an object ({...})",
    "model_type": "is not an object ({...})",
    "model_attributes_type": "is not an object ({...})",
    "none_required": "is given where nothing (null) is",
    "url_type": "is not a URL (text such as https://example.com)",
    "url_parsing": "is not a URL",
    "url_syntax_violation": "is not a URL",
    "url_too_long": "is too long for a URL",
}
"""pydantic's error types of a value of the wrong kind, as the farm says them after the value."""

_BOUNDS = {"greater_than_equal": "at least", "greater_than": "more than", "less_than_equal": "at most", "less_than": "less than"}


def _plain(err: Any) -> str:
    """What is wrong with one field, in a plain sentence: every pydantic error type a case can
    meet has its own words, and any other says the value is not one the field takes: pydantic's
    own text never reaches the user."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    if kind in ("value_error", "assertion_error"):
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if "url" not in err:
        return str(err["msg"])  # a check of the farm's own (PydanticCustomError): its words are the farm's
    if kind in _WHAT_IT_IS_NOT:
        return f"{_echo(value)} {_WHAT_IT_IS_NOT[kind]}"
    if kind in ("literal_error", "enum"):
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"{_echo(value)} is not one of {', '.join(choices)}{nearest(str(value), choices)}"
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()), "")
        limit = f"{limit:g}" if isinstance(limit, float) else limit  # 1, not 1.0, as the user would write it
        return f"must be {_BOUNDS[kind]} {limit}, not {_echo(value)}"
    if kind in ("too_short", "too_long"):
        many = ctx.get("min_length") if kind == "too_short" else ctx.get("max_length")
        noun = "key" if str(ctx.get("field_type", "")).startswith("Dict") else "item"
        return f"give at {'least' if kind == 'too_short' else 'most'} {_count(many, noun)}"
    if kind == "string_too_short":
        many = ctx.get("min_length", 1)
        return "must not be empty" if many == 1 else f"{_echo(value)} is shorter than {_count(many, 'character')}"
    if kind == "string_too_long":
        return f"{_echo(value)} is longer than {_count(ctx.get('max_length'), 'character')}"
    if kind == "url_scheme":
        schemes = re.findall(r"'([^']*)'", str(ctx.get("expected_schemes", "")))
        return f"{_echo(value)} is not a URL starting with {' or '.join(f'{s}://' for s in schemes)}"
    if kind == "multiple_of":
        return f"{_echo(value)} is not a multiple of {ctx.get('multiple_of')}"
    return f"{_echo(value)} is not a value this field takes"


def _count(many: Any, noun: str) -> str:
    """``one item``, ``3 items``: a bound of a list or a text, said as a count."""
    return f"one {noun}" if many == 1 else f"{many} {noun}s"


def _echo(value: Any) -> str:
    """A value from the case, as the problem quotes it: a string in quotes, the rest as JSON."""
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"'{text}'"
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def without_failing_fields(data: dict[str, Any], exc: ValidationError) -> dict[str, Any] | None:
    """A copy of ``data`` without the fields the model refused (the innermost object key on
    each error's path), so that the rest can still be checked; None when none can be told."""
    cleaned = copy.deepcopy(data)
    dropped = False
    for err in exc.errors():
        holder: Any = None
        key: Any = None
        node: Any = cleaned
        for part in err["loc"]:
            if isinstance(node, dict) and part in node:
                holder, key, node = node, part, node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                break
        if holder is not None and key in holder:
            del holder[key]
            dropped = True
    return cleaned if dropped else None


def rule_problems(case: TestCase, known_types: set[str], modes: bool = True, assertions: list[tuple[str, AssertionSpec]] | None = None) -> list[str]:
    """What the case model cannot state (docs/reference/cases.md, docs/reference/assertions.md), every problem of it: unknown assertion
    types, then (``modes``) the fields the case's mode needs and its checkpoint ids.
    ``assertions``: :func:`every_assertion` of the case, when the caller has it already."""
    out = []
    for where, spec in every_assertion(case) if assertions is None else assertions:
        if spec.type not in known_types:
            known = ", ".join(sorted(known_types))
            out.append(f"field '{where}.type': unknown assertion type '{shown(spec.type)}'{nearest(spec.type, known_types) or f' (known: {known})'}")
    if not modes:
        return out
    try:
        mode = case.resolved_mode
    except CaseRuleError as exc:
        both = case.turns is not None and case.checkpoints is not None
        return [*out, f"field '{'checkpoints' if both else 'mode'}': {exc}"]
    if mode == Mode.STATIC and not case.turns:
        out.append("field 'turns': must hold at least one turn")
    if mode == Mode.SINGLE and case.input is None:
        out.append("field 'input': a single-turn case needs an 'input'")
    if mode == Mode.DYNAMIC:
        ids = [cp.id for cp in case.checkpoints or []]
        if not ids:
            out.append("field 'checkpoints': must hold at least one checkpoint")
        elif not any(cp.required for cp in case.checkpoints or []):
            out.append(
                "field 'checkpoints': every checkpoint is required: false, so the conversation would pass at the"
                " agent's first reply whatever it said; make at least one required"
            )
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            out.append(f"field 'checkpoints': duplicate checkpoint id(s): {', '.join(shown(d) for d in dupes)}")
        for i, cp in enumerate(case.checkpoints or []):
            unknown = [shown(a) for a in cp.after if a not in ids]
            if unknown:
                out.append(f"field 'checkpoints[{i}].after': checkpoint '{shown(cp.id)}' is after unknown checkpoint(s): {', '.join(unknown)}")
    return out


# -- the valid case ------------------------------------------------------------------------


def every_assertion(case: TestCase) -> list[tuple[str, AssertionSpec]]:
    """Every assertion of ``case`` with where it is (``turns[0].assertions[1]``), in the order a reader meets them."""
    out = [(f"assertions[{i}]", s) for i, s in enumerate(case.assertions)]
    if case.final_assertions:  # each part looked at only when there is one: this runs for every case, thrice
        out += [(f"final_assertions[{i}]", s) for i, s in enumerate(case.final_assertions)]
    if case.turns:
        for t, turn in enumerate(case.turns):
            out += [(f"turns[{t}].assertions[{i}]", s) for i, s in enumerate(turn.assertions)]
    if case.checkpoints:
        out += [(f"checkpoints[{c}].assertion", cp.assertion) for c, cp in enumerate(case.checkpoints)]
    return out


def case_problems(case: TestCase, assertions: list[tuple[str, AssertionSpec]] | None = None) -> list[str]:
    """Problems of a valid case that a schema cannot see (regex, JSONPath, values, checkpoints);
    ``assertions`` as for :func:`rule_problems`."""
    out: list[str] = []
    for where, spec in every_assertion(case) if assertions is None else assertions:
        out += [f"field '{where}{inner}': {problem}" for inner, problem in assertion_problems(spec)]
    out.extend(_checkpoint_cycles(case))
    return out


def assertion_problems(spec: AssertionSpec) -> list[tuple[str, str]]:
    """What is wrong with one assertion as written: each problem with the field it is in, within
    the assertion (``.value[1]``; ``""``: the assertion itself). Patterns are compiled by the
    engine the run searches with (:mod:`farm.assertions.patterns`), so none is accepted here
    and refused there, or the other way round; JSONPaths are read as the run reads them
    (:func:`farm.jsonpaths.parse_path`)."""
    if spec.type in TRACE_PARAMS:
        return [(f".{field_path(err['loc'])}" if err["loc"] else "", shown(_plain(err))) for err in params_errors(spec)]
    if spec.type in ("json_path", "type") and spec.path is not None:
        if not spec.path.strip():
            return [(".path", "must not be empty")]
        try:
            parse_path(spec.path)
        except ValueError as exc:
            return [(".path", str(exc))]
    problem = _assertion_problem(spec)
    if problem:
        return [("", problem)]
    empty = _empty_value(spec)
    return [empty] if empty is not None else []


_LOOK_FOR = {
    "contains": "the text to look for",
    "not_contains": "the text that must be absent",
}


def _empty_value(spec: AssertionSpec) -> tuple[str, str] | None:
    """An empty text or list where an assertion looks for something: it would match every reply
    (``contains ""`` always passes, ``not_contains ""`` always fails), or none (``tool_called ""``):
    the case could never say anything about the agent."""
    kind = spec.type
    if kind in _LOOK_FOR:
        value = spec.value
        said = f"an empty value matches every reply; give {_LOOK_FOR[kind]}"
        if value == "" or value == []:
            return ".value", said
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item == "":
                    return f".value[{i}]", said
    if kind == "tool_called" and isinstance(spec.name, list):
        field = "value" if spec.value == spec.name else "name"  # as the case wrote it (Yao's spelling: value)
        for i, item in enumerate(spec.name):
            if item == "":
                return f".{field}[{i}]", "an empty name matches no tool; give the tool's name"
    if kind == "tool_result":
        result = spec.extra("result")
        if result == {}:
            return ".result", "an empty object matches every result; give the keys to look for, or leave 'result' out"
        if any(pattern == "" for pattern in _regex_strings(result)):
            return ".result", "'regex:' with no pattern after it matches every result; give the pattern"
    if kind == "agent":
        for key in ("criteria", "value"):
            criteria = spec.extra(key) if key == "criteria" else spec.value
            if isinstance(criteria, str) and not criteria.strip():
                return f".{key}", "empty criteria give the validator nothing to judge by; say what the reply must do"
    return None


def _assertion_problem(spec: AssertionSpec) -> str | None:
    """What else is wrong with one assertion as written (the values each type needs, the syntax
    of its patterns and paths), or None."""
    kind, set_ = spec.type, spec.model_fields_set
    if kind in ("contains", "not_contains") and spec.value is None:
        return f"a '{kind}' assertion needs a 'value' ({_LOOK_FOR[kind]})"
    if kind == "equals" and "value" not in set_:
        return "an 'equals' assertion needs a 'value'"
    if kind == "regex" or (kind == "tool_result" and spec.extra("result") is not None):
        from farm.assertions.patterns import compile_pattern

        if kind == "regex" and not spec.pattern:
            return "a 'regex' assertion needs a 'pattern' (or a string 'value')"
        patterns = [spec.pattern or ""] if kind == "regex" else list(_regex_strings(spec.extra("result")))
        for pattern in patterns:
            try:
                compile_pattern(pattern, bool(spec.ignore_case))
            except (RecursionError, OverflowError, ValueError) as exc:  # InvalidPattern is a ValueError
                return f"invalid regex {pattern!r}: {shown(str(exc))}"
    if kind == "json_path" and not spec.path:
        return "a 'json_path' assertion needs a 'path' (a JSONPath such as $.status)"
    if kind == "type":
        if not isinstance(spec.value, str):
            return f"a 'type' assertion needs a 'value' naming a JSON type ({', '.join(JSON_TYPE_NAMES)})"
        if spec.value.lower() not in JSON_TYPE_NAMES:
            hint = " (use number)" if spec.value.lower() in ("integer", "int", "float") else nearest(spec.value.lower(), JSON_TYPE_NAMES)
            return f"unknown type name '{shown(spec.value)}'{hint}; known: {', '.join(JSON_TYPE_NAMES)}"
    if kind == "tool_called" and (spec.name is None or spec.name == [] or spec.name == ""):
        return "a 'tool_called' assertion needs a 'name' (or 'value'): the tool expected"
    if kind == "tool_called":
        for item in spec.name if isinstance(spec.name, list) else [spec.name]:
            if isinstance(item, dict) and not item.get("name"):
                return "every tool_called object needs a 'name'"
    if kind == "tool_result" and not spec.extra("tool"):
        return "a 'tool_result' assertion needs a 'tool' (or 'value': {tool, result})"
    if kind == "latency" and (isinstance(spec.value, bool) or not isinstance(spec.value, (int, float))):
        return "a 'latency' assertion needs a numeric 'value' (the most milliseconds allowed)"
    if kind == "latency" and not 0 <= spec.value <= MAX_LATENCY_MS:
        return f"a 'latency' 'value' is milliseconds from 0 to {MAX_LATENCY_MS} (a day)"
    if kind == "script" and not spec.use:
        return "a 'script' assertion needs 'script' (or 'use'): e.g. scripts.tests.check"
    return None


def _regex_strings(expected: Any) -> Iterable[str]:
    stack = [expected]
    while stack:
        value = stack.pop()
        if isinstance(value, str) and value.startswith("regex:"):
            yield value[len("regex:"):]
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _checkpoint_cycles(case: TestCase) -> list[str]:
    if not case.checkpoints:
        return []
    after = {cp.id: list(cp.after) for cp in case.checkpoints or []}
    out = []
    for i, cp in enumerate(case.checkpoints or []):
        if cp.id in cp.after:
            out.append(f"field 'checkpoints[{i}].after': checkpoint '{shown(cp.id)}' depends on itself")
            after[cp.id] = [a for a in cp.after if a != cp.id]  # said once: not a cycle as well
    state: dict[str, int] = {}  # 1: on the path, 2: done
    for start in after:
        if state.get(start):
            continue
        path = [start]
        iters = [iter(after[start])]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
                continue
            if nxt not in after or state.get(nxt) == 2:
                continue
            if state.get(nxt) == 1:
                loop = " -> ".join(shown(p) for p in path[path.index(nxt):] + [nxt])
                return [*out, f"field 'checkpoints': the checkpoints depend on each other in a cycle ({loop}), so none of them can be reached"]
            state[nxt] = 1
            path.append(nxt)
            iters.append(iter(after[nxt]))
    return out
