"""The assertion registry: a type name maps to one checker function.

A checker takes the :class:`AssertionSpec` as written and the :class:`Subject`
it judges, and returns an :class:`Outcome` (sync or async). :func:`evaluate`
applies what every assertion shares — ``negate``, ``message``, truncation of
``actual``, and turning an exception into an ``error`` result — so a checker
only says whether the thing holds and what it saw.

Adding a type is one decorated function::

    @assertion("starts_with")
    def starts_with(spec, subject, env):
        return Outcome(subject.content.startswith(spec.value), subject.content)

A type may also say how it reads in a report (``describe=``), so the console
and other reporters show ``$.a.b = "y"`` rather than the raw expected value
without knowing the type; :func:`describe` asks it.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from farm.cases import AssertionSpec
from farm.excerpts import LENGTH, NOTHING, clip
from farm.jsontext import as_text, extract_json, json_text
from farm.results import ACTUAL_LIMIT, AssertionResult, SpanRecord, ToolCallRecord

__all__ = [
    "AssertionEnv",
    "Outcome",
    "Subject",
    "assertion",
    "checkers",
    "describe",
    "evaluate",
    "fields_of",
    "known_types",
    "truncate",
]


@dataclass
class Subject:
    """What an assertion looks at: one reply (a turn), or the session (final assertions)."""

    content: str = ""
    """The agent's reply text."""
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    """Tool calls made in the turn, with the results the farm gave back."""
    latency_ms: float = 0.0
    """How long the turn took."""
    input: Any = None
    """The user input that produced the reply."""
    tool_texts: list[str] = field(default_factory=list)
    """Tool result messages; ``contains`` looks at them too in dynamic mode."""
    document: Any = None
    """For ``json_path``/``type``: the JSON to look at. None: the reply's JSON."""
    conversation: list[dict[str, Any]] = field(default_factory=list)
    """The whole conversation so far, for validators."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Case context (id, tags, ...), passed on to validators and scripts."""
    time_limit: float | None = None
    """Seconds a check may spend on this subject (the turn timeout); None: each type's default."""
    spans: list[SpanRecord] | None = None
    """The agent's spans: the turn's, or (final assertions, checkpoints) the case run's so far;
    None when the run does not capture traces."""
    trace_scope: str = "this turn"
    """How a trace assertion's message names what it looked at (``this turn``, ``the case run``)."""

    def json(self) -> Any:
        """The JSON document assertions over structure look at, or NO_JSON."""
        if self.document is not None:
            return self.document
        return extract_json(self.content)

    def searchable_text(self) -> str:
        return "\n".join([self.content, *self.tool_texts]) if self.tool_texts else self.content


@dataclass
class Outcome:
    """What a checker found, before ``negate`` and ``message`` are applied."""

    passed: bool
    actual: Any = None
    message: str | None = None
    """Why it failed (for a negated assertion, :func:`evaluate` writes its own)."""
    score: float | None = None
    reason: str | None = None
    suggestions: list[str] | None = None
    error: bool = False
    """The check could not be made at all; negate does not turn this into a pass."""
    inconclusive: bool = False
    """The check ran out of time (a runaway regex): a failure that neither negate nor ``message`` rewrites."""
    matched_by: str | None = None
    """Which rule matched (``tool_called``: exact, suffix or substring)."""


class AssertionEnv(Protocol):
    """Services the non-deterministic assertion types need (validators, scripts)."""

    async def validate(self, spec: AssertionSpec, subject: Subject) -> Outcome: ...

    async def run_script(self, spec: AssertionSpec, subject: Subject) -> Outcome: ...


Checker = Callable[[AssertionSpec, Subject, "AssertionEnv | None"], "Outcome | Awaitable[Outcome]"]

Describer = Callable[[Any], "str | None"]
"""Writes what an assertion checks from its ``expected`` value, or None for the plain form."""

_REGISTRY: dict[str, Checker] = {}
_DESCRIBERS: dict[str, Describer] = {}
_FIELDS: dict[str, dict[str, str]] = {}


def assertion(name: str, describe: Describer | None = None, fields: dict[str, str] | None = None) -> Callable[[Checker], Checker]:
    """Register ``fn`` as the checker of assertion type ``name``.

    ``describe``, if given, writes the one-line form of what the assertion checks
    (see :func:`describe`); without it the type reads as ``name <expected as JSON>``.
    ``fields``: the keys the type reads besides those every assertion has (``type``,
    ``negate``, ``message``, ``options``), each with what it means; ``farm validate``
    calls any other key unknown, and docs/reference/assertions.md lists them.
    """

    def register(fn: Checker) -> Checker:
        if name in _REGISTRY:
            raise ValueError(f"assertion type '{name}' is registered twice")
        _REGISTRY[name] = fn
        _FIELDS[name] = dict(fields or {})
        if describe is not None:
            _DESCRIBERS[name] = describe
        return fn

    return register


def fields_of(type_name: str) -> dict[str, str]:
    """The keys assertion type ``type_name`` reads besides the common ones, each with its meaning
    (see :func:`assertion`); raises KeyError for an unknown type."""
    _register_builtin()
    return dict(_FIELDS[type_name])


def describe(type_name: str, expected: Any) -> str:
    """What an assertion checks, on one line: ``contains "x"``, ``$.a.b = "y"``, ``latency ≤ 500ms``.

    The type's own describer speaks first; a type without one, an unknown type, or
    an ``expected`` value its describer does not recognise reads as the type name
    followed by the expected value as JSON (the name alone when nothing is expected).
    """
    _register_builtin()
    describer = _DESCRIBERS.get(type_name)
    text = describer(expected) if describer is not None else None
    if text is not None:
        return text
    return type_name if expected is None else f"{type_name} {json_text(expected)}"


def checkers() -> dict[str, Checker]:
    """Every registered assertion type's checker, in the order they were registered."""
    _register_builtin()
    return dict(_REGISTRY)


def known_types() -> set[str]:
    """Every registered assertion type's name."""
    _register_builtin()
    return set(_REGISTRY)


def _register_builtin() -> None:
    from farm.assertions import builtin, traces  # noqa: F401  (registers the built-in types)


def truncate(value: Any, limit: int = ACTUAL_LIMIT) -> Any:
    """``value`` cut to about ``limit`` characters (structures are cut as JSON text)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return clip(value, limit, LENGTH, within=False)
    text = json_text(value)
    return value if len(text) <= limit else clip(text, limit, LENGTH, within=False)


async def evaluate(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None = None) -> AssertionResult:
    """Run one assertion; never raises for a problem with the assertion itself."""
    _register_builtin()
    checker = _REGISTRY.get(spec.type)
    if checker is None:
        outcome = Outcome(
            False,
            message=f"unknown assertion type '{spec.type}' (known: {', '.join(sorted(_REGISTRY))})",
            error=True,
        )
    else:
        try:
            result = checker(spec, subject, env)
            outcome = await result if inspect.isawaitable(result) else result
        except Exception as exc:  # a user's regex, path or script can fail in any way
            outcome = Outcome(False, message=f"{spec.type}: {type(exc).__name__}: {exc}", error=True)
    passed = outcome.passed
    message = outcome.message
    final = outcome.error or outcome.inconclusive
    if spec.negate and not final:
        passed = not passed
        message = None if passed else f"expected NOT {spec.type} {_short(spec.expected)}, but it held"
    if not passed and spec.message and not final:
        message = spec.message
    return AssertionResult(
        type=spec.type,
        expected=truncate(spec.expected),
        actual=truncate(outcome.actual),
        passed=passed,
        message=None if passed else (message or f"{spec.type} failed"),
        negate=spec.negate,
        score=outcome.score,
        reason=outcome.reason,
        suggestions=outcome.suggestions,
        error=outcome.error,
        matched_by=outcome.matched_by,
    )


def _short(value: Any) -> str:
    text = clip(as_text(value, ensure_ascii=True), 80, NOTHING)
    return repr(text) if isinstance(value, str) else text

