"""The built-in assertion types (docs/reference/assertions.md), one checker each.

Importing this module registers them (:mod:`farm.assertions.registry` imports it
when it loads). Each checker says only whether its condition holds and what it saw;
``negate``, ``message`` and truncation are applied by
:func:`farm.assertions.evaluate`.

"JSON-equal" throughout means equal as JSON values: ``1 == 1.0``, but
``true`` is not ``1`` (Python would say it is).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from farm.assertions import patterns as _patterns
from farm.assertions.checker import AssertionEnv, Outcome, Subject, assertion
from farm.cases import AssertionSpec
from farm.excerpts import clip
from farm.jsonpaths import parse_path
from farm.jsontext import NO_JSON, arguments_text, as_text, extract_json, json_text

__all__ = ["json_equal", "json_type", "partial_match"]

JSON_TYPES = ("string", "number", "boolean", "array", "object", "null")
"""Yao's type names; ``integer`` is not one (a load error says to use ``number``)."""


# --- how each type reads in a report ---------------------------------------
# Each returns None for an ``expected`` value it does not recognise, which then
# reads in the plain form (see farm.assertions.registry.describe).


def _describe_json_path(expected: Any) -> str | None:
    if isinstance(expected, dict) and "path" in expected:
        return f"{expected['path']} = {json_text(expected.get('value'))}"
    return None


def _describe_type(expected: Any) -> str | None:
    if isinstance(expected, dict) and "path" in expected:
        return f"type {expected['path']} is {json_text(expected.get('value'))}"
    return None


def _describe_tool_called(expected: Any) -> str | None:
    if isinstance(expected, dict) and "name" in expected:
        arguments = expected.get("arguments")
        return f"tool_called {expected['name']}({arguments_text(arguments) if arguments else ''})"
    return None


def _describe_tool_result(expected: Any) -> str | None:
    if isinstance(expected, dict) and "tool" in expected:
        return f"tool_result {expected['tool']} → {json_text(expected.get('result'))}"
    return None


def _describe_latency(expected: Any) -> str | None:
    return None if expected is None else f"latency ≤ {expected}ms"


# --- shared helpers -------------------------------------------------------


def json_equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON value (a bool never equals a number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def partial_match(expected: Any, actual: Any, patterns: bool = False, deadline: float | None = None) -> bool:
    """Whether ``actual`` holds everything ``expected`` states.

    Objects match when every expected key is present and matches (extra keys
    are fine), recursively; anything else must be JSON-equal. With
    ``patterns``, a string ``"regex:<pattern>"`` is searched in the actual
    value's text, and arrays match element by element so patterns work there too;
    the searches block, and stop with :class:`~farm.assertions.patterns.PatternTimeout`
    at ``deadline`` (``time.monotonic()``; default: each its own default limit).
    """
    if isinstance(expected, dict):
        if isinstance(actual, str) and patterns:
            actual = _loads_or(actual, actual)  # a tool may return its JSON as text
        return isinstance(actual, dict) and all(
            key in actual and partial_match(value, actual[key], patterns, deadline) for key, value in expected.items()
        )
    if patterns and isinstance(expected, str) and expected.startswith("regex:"):
        limit = _seconds_left(deadline)
        return _patterns.search_blocking(expected[len("regex:"):], as_text(actual), limit=limit)
    if patterns and isinstance(expected, list) and isinstance(actual, list):
        pairs = zip(expected, actual, strict=False)  # lengths compared first
        return len(expected) == len(actual) and all(partial_match(e, a, patterns, deadline) for e, a in pairs)
    return json_equal(expected, actual)


def _seconds_left(deadline: float | None) -> float:
    """Seconds left until ``deadline`` for one search (the default limit without one)."""
    if deadline is None:
        return _patterns.DEFAULT_LIMIT
    return max(deadline - time.monotonic(), 0.001)


def _has_patterns(expected: Any) -> bool:
    if isinstance(expected, str):
        return expected.startswith("regex:")
    if isinstance(expected, dict):
        return any(_has_patterns(v) for v in expected.values())
    if isinstance(expected, list):
        return any(_has_patterns(v) for v in expected)
    return False


def _loads_or(text: str, default: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return default


def _show(value: Any, limit: int = 80) -> str:
    """A value for a one-line failure message: strings quoted, the rest as JSON, cut short."""
    text = repr(value) if isinstance(value, str) else as_text(value)
    return clip(text, limit, within=False)


def _needs(spec: AssertionSpec, what: str) -> Outcome:
    """The error for an assertion written without a key it needs."""
    return Outcome(False, message=f"a '{spec.type}' assertion needs {what}", error=True)


def _find(path: str, document: Any) -> list[Any]:
    """The values ``path`` matches in ``document``; raises ValueError for a bad path."""
    return [match.value for match in parse_path(path).find(document)]


# --- text -----------------------------------------------------------------


def _containment(spec: AssertionSpec, subject: Subject, wanted: bool) -> Outcome:
    """``contains`` (``wanted``) or ``not_contains``: every ``value`` is in the searchable text, or none is."""
    if spec.value is None:
        return _needs(spec, "a 'value' (the text to find)" if wanted else "a 'value' (the text that must be absent)")
    values = spec.value if isinstance(spec.value, list) else [spec.value]
    if not values or "" in values:  # found in every reply: it would pass (or fail) whatever the agent said
        return _needs(spec, "a 'value' that is not empty (an empty one matches every reply)")
    text = subject.searchable_text()
    fold = str.casefold if spec.ignore_case else str
    wrong = [value for value in map(as_text, values) if (fold(value) in fold(text)) != wanted]
    verb = "to contain" if wanted else "not to contain"
    return Outcome(not wrong, text, f"expected the reply {verb} {', '.join(map(_show, wrong))}")


_IGNORE_CASE = "``true``: compare ignoring case (Unicode case folding). Default ``false``: case-sensitive."


@assertion("contains", fields={
    "value": "The text to find: a string, or a list of strings that must all be found (none empty: every reply holds the empty text). A number or an object is looked for as its JSON text.",
    "ignore_case": _IGNORE_CASE,
})
def contains(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The reply (and tool result texts) contains ``value``; a list of values: all of them."""
    return _containment(spec, subject, wanted=True)


@assertion("not_contains", fields={
    "value": "The text that must be absent: a string, or a list of strings none of which may be found (none empty).",
    "ignore_case": _IGNORE_CASE,
})
def not_contains(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The reply (and tool result texts) does not contain ``value``; a list: none of them."""
    return _containment(spec, subject, wanted=False)


@assertion("equals", fields={
    "value": "The whole expected reply: a string (the same text, or the same JSON), or any other JSON value"
    " (compared with the JSON in the reply). An assertion object with a ``value`` and no ``type`` is an ``equals``.",
})
def equals(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The reply is exactly ``value``, ignoring whitespace around the reply.

    A string ``value`` passes on the same text, or when both it and the reply
    parse as JSON and are JSON-equal (``{"a":1}`` equals ``{ "a": 1 }``). Any
    other ``value`` is compared with the JSON in the reply, which may sit in a
    fenced block or in prose.
    """
    if "value" not in spec.model_fields_set:
        return _needs(spec, "a 'value'")
    content = subject.content.strip()
    expected = spec.value
    message = f"expected the reply to equal {_show(expected)}"
    if not isinstance(expected, str):
        return Outcome(json_equal(extract_json(content), expected), content, message)
    if content == expected:
        return Outcome(True, content)
    left, right = _loads_or(content, NO_JSON), _loads_or(expected, NO_JSON)
    both_json = left is not NO_JSON and right is not NO_JSON
    return Outcome(both_json and json_equal(left, right), content, message)


@assertion("regex", fields={
    "pattern": "The regular expression, in Python's syntax (``(?i)`` at its start ignores case).",
    "value": "Yao's spelling of ``pattern``.",
    "ignore_case": "``true``: match ignoring case. Default ``false``: case-sensitive.",
})
async def regex(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """A Python-syntax search of ``pattern`` in the reply finds a match; ``ignore_case`` ignores case.

    The search is bounded by the turn timeout (at most
    :data:`~farm.assertions.patterns.DEFAULT_LIMIT`) and does not block the
    event loop: a pattern that runs away fails this assertion and nothing else.
    """
    if not spec.pattern:
        return _needs(spec, "a 'pattern' (or a string 'value')")
    limit = _patterns.limit_for(subject.time_limit)
    try:
        found = await _patterns.search(spec.pattern, subject.content, ignore_case=bool(spec.ignore_case), limit=limit)
    except _patterns.InvalidPattern as exc:
        return Outcome(False, message=f"invalid regex {spec.pattern!r}: {exc}", error=True)
    except _patterns.PatternTimeout as exc:
        return Outcome(False, subject.content, str(exc), inconclusive=True)
    return Outcome(found, subject.content, f"expected the reply to match /{spec.pattern}/")


# --- JSON structure ---------------------------------------------------------


@assertion("json_path", describe=_describe_json_path, fields={
    "path": "A JSONPath (jsonpath-ng's extended syntax), e.g. ``$.status`` or ``$.items[0].id``.",
    "value": "The expected value, compared as JSON (``1`` equals ``1.0``, ``true`` is not ``1``); an array means any of its items. Without ``value``, the path only has to match something.",
})
def json_path(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """A value at ``path`` in the reply's JSON is JSON-equal to ``value``.

    An array ``value`` means "any of" (a match equal to the whole array passes
    too). Without a ``value`` key, the path only has to match something.
    """
    if not spec.path:
        return _needs(spec, "a 'path' (a JSONPath such as $.status)")
    document = subject.json()
    if document is NO_JSON:
        return Outcome(False, subject.content, "the reply holds no JSON")
    try:
        matches = _find(spec.path, document)
    except ValueError as exc:
        return Outcome(False, message=str(exc), error=True)
    if not matches:
        return Outcome(False, document, f"path {spec.path} matched nothing")
    actual = matches[0] if len(matches) == 1 else matches
    if "value" not in spec.model_fields_set:
        return Outcome(True, actual)
    expected = spec.value
    choices = [expected, *expected] if isinstance(expected, list) else [expected]
    passed = any(json_equal(m, c) for m in matches for c in choices)
    wanted = f"one of {_show(expected)}" if isinstance(expected, list) else _show(expected)
    return Outcome(passed, actual, f"expected {spec.path} to be {wanted}, found {_show(actual)}")


def json_type(value: Any) -> str:
    """The JSON type name of a Python value parsed from JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _has_type(value: Any, name: str) -> bool:
    return json_type(value) == name


def _whole_json(content: str) -> Any:
    """The reply as JSON when the whole of it (optionally in one fence) is JSON, else NO_JSON."""
    text = content.strip()
    fenced = re.fullmatch(r"```[A-Za-z]*[ \t]*\n?(.*?)\n?```", text, re.DOTALL)
    if fenced and "```" not in fenced.group(1):
        text = fenced.group(1).strip()
    return _loads_or(text, NO_JSON) if text else NO_JSON


@assertion("type", describe=_describe_type, fields={
    "path": "A JSONPath to the values to check; without it, the whole reply is checked.",
    "value": "The JSON type name: ``string``, ``number``, ``boolean``, ``array``, ``object`` or ``null`` (any case; ``integer`` is not one).",
})
def type_(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """Every value at ``path`` (or the whole reply) has the JSON type ``value``.

    Type names: string, number, boolean, array, object, null. Without a
    ``path``, it is the type of the whole reply: its JSON type when the whole
    reply (optionally in one fence) is JSON, else ``string`` (as in Yao, prose
    around an object does not make the reply an object).
    """
    name = str(spec.value).lower() if spec.value is not None else None
    if name not in JSON_TYPES:
        return _needs(spec, f"a 'value' naming a JSON type ({', '.join(JSON_TYPES)})")
    document = subject.json() if spec.path is not None else None
    if spec.path is None:
        whole = subject.document if subject.document is not None else _whole_json(subject.content)
        values = [subject.content if whole is NO_JSON else whole]
    elif document is NO_JSON:
        return Outcome(False, subject.content, "the reply holds no JSON")
    else:
        try:
            values = _find(spec.path, document)
        except ValueError as exc:
            return Outcome(False, message=str(exc), error=True)
        if not values:
            return Outcome(False, document, f"path {spec.path} matched nothing")
    types = [json_type(v) for v in values]
    actual = types[0] if len(types) == 1 else types
    wrong = [v for v in values if not _has_type(v, name)]
    if not wrong:
        return Outcome(True, actual)
    where = spec.path or "the reply"
    found = f"{json_type(wrong[0])} {_show(wrong[0])}"
    return Outcome(False, actual, f"expected {where} to be of type {name}, found {found}")


# --- tools -------------------------------------------------------------------


def _wanted_calls(name: Any) -> list[tuple[str, Any]]:
    """``name`` as (tool name, expected arguments or None) pairs; raises ValueError."""
    items = name if isinstance(name, list) else [name]
    wanted = []
    for item in items:
        if isinstance(item, dict):
            if not item.get("name"):
                raise ValueError("every tool_called object needs a 'name'")
            wanted.append((str(item["name"]), item.get("arguments")))
        else:
            wanted.append((str(item), None))
    return wanted


@assertion("tool_called", describe=_describe_tool_called, fields={
    "name": "The tool: its name, ``{\"name\": ..., \"arguments\": {...}}`` (the expected arguments must be present and JSON-equal; extra ones are fine), or a list of either meaning any of them.",
    "value": "Yao's spelling of ``name``.",
})
def tool_called(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """A tool with this ``name`` was called (``value`` is accepted for ``name``).

    ``name`` is a tool name, ``{name, arguments}`` (called with every expected
    argument present and JSON-equal; nested objects match as subsets), or a
    list of either, meaning any of them.
    """
    if spec.name is None or spec.name == []:
        return _needs(spec, "a 'name' (or 'value'): the tool expected")
    try:
        wanted = _wanted_calls(spec.name)
    except ValueError as exc:
        return Outcome(False, message=str(exc), error=True)
    called = [call.name for call in subject.tool_calls]
    rule = None
    for rule_name, same in _NAME_RULES:  # exact first; then, as Yao does, suffix, then substring
        if any(
            same(call.name, tool) and (arguments is None or partial_match(arguments, call.args))
            for tool, arguments in wanted
            for call in subject.tool_calls
        ):
            rule = rule_name
            break
    shown = [repr(t) + (f" with arguments {_show(a)}" if a is not None else "") for t, a in wanted]
    what = f"tool {shown[0]} was" if len(shown) == 1 else f"none of the tools {', '.join(shown)} was"
    seen = f"called: {', '.join(called)}" if called else "no tool was called"
    return Outcome(rule is not None, called, f"{what} not called ({seen})", matched_by=rule)


_NAME_RULES = (
    ("exact", lambda called, wanted: called == wanted),
    ("suffix", lambda called, wanted: bool(wanted) and called.endswith(wanted)),
    ("substring", lambda called, wanted: bool(wanted) and wanted in called),
)
"""How a called tool's name matches the expected one: ``agents_expense_tools__setup``
matches ``setup`` by suffix (MCP-style namespaces)."""


@assertion("tool_result", describe=_describe_tool_result, fields={
    "tool": "The tool's name, matched as ``tool_called`` matches names (exact, then suffix, then substring).",
    "result": "The expected result, matched partially: expected keys present and matching, extra keys fine;"
    " a string ``\"regex:<pattern>\"`` is searched in the actual value. Without ``result``: the tool was called and"
    " its result carries no error (an ``error`` key, ``is_error``, or a ``status`` of ``error``/``failed``).",
    "value": "Yao's spelling: ``{\"tool\": ..., \"result\": ...}``.",
})
async def tool_result(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """A call of ``tool`` returned a result that matches ``result``.

    The match is partial: expected object keys must be present and match,
    extra keys are fine, and strings starting ``regex:`` are patterns searched
    in the actual value. Any one call of the tool matching is enough. Without
    ``result`` (as in Yao): the tool was called and a result carries no error.
    """
    tool = spec.extra("tool")
    if not tool:
        return _needs(spec, "a 'tool' (or 'value': {tool, result})")
    results: list[Any] = []
    for _rule, same in _NAME_RULES:  # the same name rules as tool_called
        results = [call.result for call in subject.tool_calls if same(call.name, str(tool))]
        if results:
            break
    if not results:
        called = [call.name for call in subject.tool_calls]
        return Outcome(False, called, f"tool {tool!r} was not called (called: {', '.join(called) or 'none'})")
    actual = results[0] if len(results) == 1 else results
    if "result" not in (spec.model_extra or {}):
        clean = [r for r in results if not _is_error(r)]
        return Outcome(bool(clean), actual, f"the result of tool {tool!r} carries an error")
    expected = spec.extra("result")
    if _has_patterns(expected):  # user regexes: off the event loop, within the turn's time
        limit = _patterns.limit_for(subject.time_limit)
        deadline = time.monotonic() + limit

        def any_match() -> bool:
            return any(partial_match(expected, result, patterns=True, deadline=deadline) for result in results)

        try:
            passed = await _patterns.off_loop(any_match, limit)
        except (_patterns.PatternTimeout, TimeoutError) as exc:
            pattern = exc.pattern if isinstance(exc, _patterns.PatternTimeout) else _show(expected)
            message = str(_patterns.PatternTimeout(pattern, limit))
            return Outcome(False, results[0] if len(results) == 1 else results, message, inconclusive=True)
    else:
        passed = any(partial_match(expected, result, patterns=True) for result in results)
    actual = results[0] if len(results) == 1 else results
    return Outcome(passed, actual, f"the result of tool {tool!r} does not match {_show(expected)}")


def _is_error(result: Any) -> bool:
    """Whether a tool result reports an error (Yao: an ``error`` key or an error status)."""
    if isinstance(result, str):
        result = _loads_or(result, result)
    if isinstance(result, dict):
        if result.get("error") not in (None, "", False):
            return True
        if result.get("is_error") is True or result.get("isError") is True:
            return True
        status = result.get("status")
        return isinstance(status, str) and status.lower() in ("error", "failed", "failure")
    return False


# --- time, judges, scripts ------------------------------------------------


@assertion("latency", describe=_describe_latency, fields={
    "value": "The most milliseconds the turn may take (0 to 86,400,000): the agent's time, not time spent waiting for a rate-limit permit.",
})
def latency(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The turn took at most ``value`` milliseconds."""
    limit = spec.value
    if isinstance(limit, bool) or not isinstance(limit, (int, float)):
        return _needs(spec, "a numeric 'value' (the most milliseconds allowed)")
    took = subject.latency_ms
    return Outcome(took <= limit, took, f"the turn took {took:.0f} ms, more than {limit} ms")


@assertion("agent", fields={
    "use": "The validator agent, ``agents:<id>`` or ``<id>`` (default: ``[farm].validator``).",
    "value": "The criteria the validator judges by, when ``criteria`` is not given.",
    "criteria": "The criteria the validator judges by (the ``{criteria}`` of its prompt).",
})
async def agent(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """An LLM validator (or your own validator service) judges the reply; it passes on the
    validator's ``passed``, and its score, reason and suggestions are recorded. ``options.connector``
    picks the connector of that call (docs/reference/roles.md)."""
    if env is None:
        message = "agent assertions need a validator (none is available in this run)"
        return Outcome(False, message=message, error=True)
    return await env.validate(spec, subject)


@assertion("script", fields={
    "script": "The function: ``scripts:<module>[.<function>]`` (Yao: ``scripts.<module>...``) under ``scripts_dir``; function ``main`` by default.",
    "use": "The same as ``script``.",
    "value": "Accepted as Yao's suites write it, and not passed on: give the function what it needs in ``options``.",
})
async def script(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """A Python function judges the reply: it is called with the reply text, the case input and the
    assertion's ``options``, and returns a bool, ``{passed, reason, score}`` or Yao's ``{pass, message}``
    (docs/reference/roles.md)."""
    if env is None:
        message = "script assertions need a script runner (none is available in this run)"
        return Outcome(False, message=message, error=True)
    return await env.run_script(spec, subject)
