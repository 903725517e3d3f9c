"""What a checker is: the :class:`Subject` it judges, the :class:`Outcome` it returns, the
:class:`AssertionEnv` of services it may call, and :func:`assertion`, which registers it by type
name. The types themselves (:mod:`farm.assertions.builtin`, :mod:`farm.assertions.traces`) stand
on this module; :mod:`farm.assertions.registry`, which evaluates them, stands on the types.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from farm.cases import AssertionSpec
from farm.jsontext import extract_json
from farm.results._records import SpanRecord, ToolCallRecord

__all__ = ["CHECKERS", "DESCRIBERS", "FIELDS", "AssertionEnv", "Checker", "Describer", "Outcome", "Subject", "assertion"]


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

CHECKERS: dict[str, Checker] = {}
"""Every registered type's checker, in the order they were registered."""
DESCRIBERS: dict[str, Describer] = {}
FIELDS: dict[str, dict[str, str]] = {}
"""The keys each type reads besides those every assertion has."""


def assertion(name: str, describe: Describer | None = None, fields: dict[str, str] | None = None) -> Callable[[Checker], Checker]:
    """Register ``fn`` as the checker of assertion type ``name``.

    ``describe``, if given, writes the one-line form of what the assertion checks
    (see :func:`farm.assertions.describe`); without it the type reads as ``name <expected as JSON>``.
    ``fields``: the keys the type reads besides those every assertion has (``type``,
    ``negate``, ``message``, ``options``), each with what it means; ``farm validate``
    calls any other key unknown, and docs/reference/assertions.md lists them.
    """

    def register(fn: Checker) -> Checker:
        if name in CHECKERS:
            raise ValueError(f"assertion type '{name}' is registered twice")
        CHECKERS[name] = fn
        FIELDS[name] = dict(fields or {})
        if describe is not None:
            DESCRIBERS[name] = describe
        return fn

    return register
