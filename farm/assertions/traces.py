"""Assertions on what an agent did inside a turn: the OpenTelemetry spans it made (docs/traces.md).

Each type is one checker and one params model (:data:`PARAMS`), which ``farm validate`` checks
the assertion's fields against. A tool call is a span whose ``gen_ai.operation.name`` is
``execute_tool``, named by ``gen_ai.tool.name`` (else by its span name after ``execute_tool ``),
its arguments in ``gen_ai.tool.call.arguments``. On a turn an assertion sees that turn's spans;
in ``final_assertions`` and in dynamic checkpoints, the whole case run's so far.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from farm.assertions.checker import AssertionEnv, Outcome, Subject, assertion
from farm.cases import AssertionSpec
from farm.results import SpanRecord

__all__ = ["PARAMS", "TRACE_TYPES", "params_errors"]

_Name = Annotated[str, Field(min_length=1)]
"""A name an assertion matches: an empty one matches nothing, so it is refused."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def _range(low: int | None, high: int | None) -> None:
    """Refuses bounds no number is within: the assertion could never pass."""
    if low is not None and high is not None and low > high:
        raise ValueError(f"'min' ({low}) is more than 'max' ({high}), so no number is within them")


class ToolExecuted(_Params):
    """``tool_executed``: the agent called a tool (a number of times)."""

    name: _Name
    """The tool's name."""
    arguments: dict[str, Any] | None = None
    """A subset of the call's arguments that a matching call must have."""
    count: int | None = Field(default=None, ge=0)
    """Exactly this many matching calls (not with ``min`` or ``max``)."""
    min: int | None = Field(default=None, ge=0)
    """At least this many (default 1, when neither ``count`` nor ``max`` is given)."""
    max: int | None = Field(default=None, ge=0)
    """At most this many (not less than ``min``)."""

    @model_validator(mode="after")
    def _bounds(self) -> ToolExecuted:
        if self.count is not None and (self.min is not None or self.max is not None):
            raise ValueError("give 'count', or 'min' and 'max', not both")
        _range(self.min, self.max)
        return self


class Trajectory(_Params):
    """``trajectory``: the tools the agent called, in an order."""

    tools: list[_Name]
    """The tool names, at least one."""
    order: Literal["exact", "in_order", "any"] = "in_order"
    """``exact``: these calls and no other, in this order; ``in_order``: these, in this order, others
    between them allowed; ``any``: each of these, in any order."""

    @field_validator("tools")
    @classmethod
    def _some(cls, tools: list[str]) -> list[str]:
        if not tools:  # said here, in words about tools: an empty list would pass on any run
            raise ValueError("give at least one tool name")
        return tools


class _Matching(_Params):
    operation: _Name | None = None
    """The spans' ``gen_ai.operation.name`` (``chat``, ``execute_tool``...)."""
    name: _Name | None = None
    """The spans' name, a glob (``search*``)."""

    @model_validator(mode="after")
    def _one_of(self) -> _Matching:
        if (self.operation is None) == (self.name is None):
            raise ValueError("give one of 'operation' and 'name' (a glob)")
        return self

    def matches(self, span: SpanRecord) -> bool:
        if self.operation is not None:
            return span.operation == self.operation
        return fnmatchcase(span.name, self.name or "")

    def said(self) -> str:
        return f"operation '{self.operation}'" if self.operation is not None else f"name '{self.name}'"


class SpanCount(_Matching):
    """``span_count``: how many spans of an operation (or a name) there are."""

    min: int | None = Field(default=None, ge=0)
    """At least this many (default 1, when ``max`` is not given either)."""
    max: int | None = Field(default=None, ge=0)
    """At most this many (not less than ``min``)."""

    @model_validator(mode="after")
    def _bounds(self) -> SpanCount:
        _range(self.min, self.max)
        return self


class SpanLatency(_Matching):
    """``span_latency``: every matching span took at most ``max_ms``."""

    max_ms: float = Field(gt=0)
    """The most milliseconds each matching span may take (at least one span must match)."""


class NoErrorSpans(_Params):
    """``no_error_spans``: no span ended with an error status."""


PARAMS: dict[str, type[BaseModel]] = {
    "tool_executed": ToolExecuted,
    "trajectory": Trajectory,
    "span_count": SpanCount,
    "span_latency": SpanLatency,
    "no_error_spans": NoErrorSpans,
}
"""Each trace assertion type's params model: its fields are the assertion's own."""

TRACE_TYPES = frozenset(PARAMS)
_COMMON = frozenset({"type", "negate", "message", "options"})


def _fields(model: type[_Params]) -> dict[str, str]:
    """A params model's fields with their docstrings: the assertion type's own keys."""
    return {name: info.description or "" for name, info in model.model_fields.items()}


def _given(spec: AssertionSpec) -> dict[str, Any]:
    """The fields ``spec`` was written with, but those every assertion has."""
    data = {name: getattr(spec, name) for name in spec.model_fields_set if name not in _COMMON}
    data.update(spec.model_extra or {})
    return data


def params_errors(spec: AssertionSpec) -> list[ErrorDetails]:
    """What is wrong with a trace assertion's fields: pydantic's errors, each with its field's
    ``loc`` within the assertion, for :mod:`farm.suite.validation` to say in the farm's words."""
    try:
        PARAMS[spec.type].model_validate(_given(spec))
    except ValidationError as exc:
        return exc.errors()
    return []


def _params(spec: AssertionSpec, model: type[Any]) -> Any:
    return model.model_validate(_given(spec))


def _spans(subject: Subject) -> list[SpanRecord]:
    return sorted(subject.spans or [], key=lambda span: span.start)


def _tools(spans: list[SpanRecord]) -> list[str]:
    return [span.tool_name or span.name for span in spans if span.operation == "execute_tool"]


def _called(subject: Subject, tools: list[str]) -> str:
    return f"{subject.trace_scope} called: {', '.join(tools) if tools else 'no tool'}"


@assertion("tool_executed", fields=_fields(ToolExecuted))
def tool_executed(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The agent executed tool ``name`` (an ``execute_tool`` span), with ``arguments`` if given: at least once,
    or ``count``/``min``/``max`` times. ``actual``: the tools called, in order."""
    from farm.assertions.builtin import partial_match
    from farm.traces.capture import arguments_of

    params: ToolExecuted = _params(spec, ToolExecuted)
    spans = [span for span in _spans(subject) if span.operation == "execute_tool"]
    named = [span for span in spans if (span.tool_name or span.name) == params.name]
    matching = [span for span in named if params.arguments is None or partial_match(params.arguments, arguments_of(span))]
    n, tools = len(matching), _tools(spans)
    low = params.count if params.count is not None else (params.min if params.min is not None else (0 if params.max is not None else 1))
    high = params.count if params.count is not None else params.max
    passed = n >= low and (high is None or n <= high)
    with_args = f" with arguments {params.arguments}" if params.arguments is not None else ""
    if params.count is not None:
        wanted = f"{params.count} call(s) of tool '{params.name}'{with_args}"
    elif high is not None:
        wanted = f"{low} to {high} call(s) of tool '{params.name}'{with_args}"
    else:
        wanted = f"a call of tool '{params.name}'{with_args}" if low == 1 else f"at least {low} calls of tool '{params.name}'{with_args}"
    return Outcome(passed, tools, message=None if passed else f"expected {wanted}, found {n}; {_called(subject, tools)}")


@assertion("trajectory", fields=_fields(Trajectory))
def trajectory(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The agent executed ``tools`` in the ``order`` asked (``in_order`` by default). ``actual``: the tools
    called, in order."""
    params: Trajectory = _params(spec, Trajectory)
    tools = _tools(_spans(subject))
    if params.order == "exact":
        passed = tools == params.tools
    elif params.order == "in_order":
        rest = iter(tools)
        passed = all(any(called == wanted for called in rest) for wanted in params.tools)  # a subsequence
    else:
        passed = set(params.tools) <= set(tools)
    wanted = {"exact": "exactly", "in_order": "in order", "any": "in any order"}[params.order]
    return Outcome(passed, tools, message=None if passed else f"expected the tools {', '.join(params.tools)} {wanted}; {_called(subject, tools)}")


@assertion("span_count", fields=_fields(SpanCount))
def span_count(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """The number of spans of an ``operation`` (or whose ``name`` matches a glob) is within ``min``..``max``
    (at least 1 by default). ``actual``: the number."""
    params: SpanCount = _params(spec, SpanCount)
    n = sum(1 for span in _spans(subject) if params.matches(span))
    low = params.min if params.min is not None else (0 if params.max is not None else 1)
    passed = n >= low and (params.max is None or n <= params.max)
    bounds = f"{low} to {params.max}" if params.max is not None else f"at least {low}"
    return Outcome(passed, n, message=None if passed else f"expected {bounds} spans of {params.said()}; {subject.trace_scope} had {n}")


@assertion("span_latency", fields=_fields(SpanLatency))
def span_latency(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """Every span of an ``operation`` (or whose ``name`` matches a glob) took at most ``max_ms``; with no
    such span it fails. ``actual``: their durations in milliseconds."""
    params: SpanLatency = _params(spec, SpanLatency)
    matching = [span for span in _spans(subject) if params.matches(span)]
    if not matching:
        return Outcome(False, [], message=f"no span of {params.said()} in {subject.trace_scope}")
    slow = [span for span in matching if span.duration_ms > params.max_ms]
    durations = [span.duration_ms for span in matching]
    if not slow:
        return Outcome(True, durations)
    worst = max(slow, key=lambda span: span.duration_ms)
    return Outcome(False, durations, message=f"{len(slow)} of {len(matching)} spans of {params.said()} took over {params.max_ms:g} ms (the slowest, '{worst.name}', {worst.duration_ms:g} ms)")


@assertion("no_error_spans", fields=_fields(NoErrorSpans))
def no_error_spans(spec: AssertionSpec, subject: Subject, env: AssertionEnv | None) -> Outcome:
    """No span of the agent ended with an error status. ``actual``: the error spans' names (and status messages)."""
    _params(spec, NoErrorSpans)
    errors = [span for span in _spans(subject) if span.status == "error"]
    said = [f"{span.name}" + (f" ({span.status_message})" if span.status_message else "") for span in errors]
    return Outcome(not errors, said, message=None if not errors else f"{subject.trace_scope} had {len(errors)} error span(s): {', '.join(said)}")
