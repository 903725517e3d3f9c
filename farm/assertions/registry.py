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
without knowing the type; :func:`describe` asks it. What a checker is, and the decorator, are
in :mod:`farm.assertions.checker`, which the built-in types import; this module imports them.
"""

from __future__ import annotations

import inspect
from typing import Any

from farm.assertions import builtin, traces  # noqa: F401  (importing them registers the built-in types)
from farm.assertions.checker import CHECKERS, DESCRIBERS, FIELDS, AssertionEnv, Checker, Outcome, Subject, assertion
from farm.cases import AssertionSpec
from farm.excerpts import LENGTH, NOTHING, clip
from farm.jsontext import as_text, json_text
from farm.results import ACTUAL_LIMIT, AssertionResult

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


def fields_of(type_name: str) -> dict[str, str]:
    """The keys assertion type ``type_name`` reads besides the common ones, each with its meaning
    (see :func:`assertion`); raises KeyError for an unknown type."""
    return dict(FIELDS[type_name])


def describe(type_name: str, expected: Any) -> str:
    """What an assertion checks, on one line: ``contains "x"``, ``$.a.b = "y"``, ``latency ≤ 500ms``.

    The type's own describer speaks first; a type without one, an unknown type, or
    an ``expected`` value its describer does not recognise reads as the type name
    followed by the expected value as JSON (the name alone when nothing is expected).
    """
    describer = DESCRIBERS.get(type_name)
    text = describer(expected) if describer is not None else None
    if text is not None:
        return text
    return type_name if expected is None else f"{type_name} {json_text(expected)}"


def checkers() -> dict[str, Checker]:
    """Every registered assertion type's checker, in the order they were registered."""
    return dict(CHECKERS)


def known_types() -> set[str]:
    """Every registered assertion type's name."""
    return set(CHECKERS)


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
    checker = CHECKERS.get(spec.type)
    if checker is None:
        outcome = Outcome(
            False,
            message=f"unknown assertion type '{spec.type}' (known: {', '.join(sorted(CHECKERS))})",
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

