"""Capturing the spans an in-process agent makes, one trace per case run (docs/traces.md).

A case run that needs traces is one trace: :class:`CaseTrace` opens its root span, and a span per
turn (``invoke_agent <agent>``) inside which the runner calls the agent, so every span the agent's
code makes through OpenTelemetry's API is a child of its turn. Many cases run at once in one
process, in tasks and in threads: the current span lives in a context variable, which each task
has its own of and which the python agent's threads are handed (:mod:`farm.agents.python`), so
nothing here knows a "current case".

:class:`Collector`, a span processor on the process's SDK tracer provider, keeps the spans of the
traces being watched and drops every other. Where the process has no SDK provider the farm sets
one; where the user's code set one, the collector is added to it, and the user's exporters are
left as they are. Nothing is installed until a case needs traces.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from farm.errors import FarmError
from farm.results import SpanRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Span
    from opentelemetry.trace import Tracer

__all__ = ["SCOPE", "CaseTrace", "Collector", "arguments_of", "collector", "span_record"]

SCOPE = "agent-test-farm"
"""The instrumentation scope of the farm's own spans (the case run's root, a turn's ``invoke_agent``)."""

VALUE_LIMIT = 2000
"""The longest attribute value kept, in characters (after secrets are masked)."""


class Collector(SpanProcessor):
    """A span processor that keeps the spans of the traces it watches, by trace id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._traces: dict[int, list[ReadableSpan]] = {}

    def watch(self, trace_id: int) -> None:
        with self._lock:
            self._traces.setdefault(trace_id, [])

    def take(self, trace_id: int) -> list[ReadableSpan]:
        """The spans of ``trace_id`` that ended since the last take, in the order they ended."""
        with self._lock:
            spans = self._traces.get(trace_id)
            if not spans:
                return []
            self._traces[trace_id] = []
            return spans

    def forget(self, trace_id: int) -> None:
        with self._lock:
            self._traces.pop(trace_id, None)

    # the SpanProcessor interface

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        with self._lock:
            bucket = self._traces.get(context.trace_id)
            if bucket is not None:
                bucket.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_LOCK = threading.Lock()
_INSTALLED: tuple[Collector, Tracer] | None = None


def collector() -> tuple[Collector, Tracer]:
    """The process's collector and the farm's tracer, installed on first use: on the SDK tracer
    provider the process has, else on one the farm sets."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED is None:
            provider = _sdk_provider()
            found = Collector()
            provider.add_span_processor(found)
            _INSTALLED = (found, provider.get_tracer(SCOPE))
        return _INSTALLED


def _sdk_provider() -> TracerProvider:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        return provider
    if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):  # none set yet
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
        if isinstance(provider, TracerProvider):
            return provider
    raise FarmError(
        f"the process's OpenTelemetry tracer provider is a {type(provider).__name__}, not the SDK's: "
        "the farm cannot collect the agent's spans from it (docs/traces.md)"
    )


class CaseTrace:
    """One case run's trace: its root span, a span per turn, and the agent's spans by turn.

    ``max_spans``: the most spans kept for the case run; the rest are counted in ``dropped``."""

    def __init__(self, case_id: str, agent: str, conversation_id: str, max_spans: int):
        from opentelemetry.context import Context

        self.collector, self.tracer = collector()
        self.agent, self.conversation_id = agent, conversation_id
        self.root = self.tracer.start_span(f"case {case_id}", context=Context(), attributes={"test.case.name": case_id})
        self.trace_id = self.root.get_span_context().trace_id
        self.collector.watch(self.trace_id)
        self.max_spans = max_spans
        self.kept = 0
        self.dropped = 0

    @contextmanager
    def turn(self) -> Iterator[list[SpanRecord]]:
        """A span for one turn, current while the agent is called; the list it gives is filled
        with the agent's spans of the turn when it ends."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        spans: list[SpanRecord] = []
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent, "gen_ai.conversation.id": self.conversation_id}
        parent = trace.set_span_in_context(self.root)
        try:
            with self.tracer.start_as_current_span(f"invoke_agent {self.agent}", context=parent, kind=SpanKind.CLIENT, attributes=attributes):
                yield spans
        finally:
            spans.extend(self._kept(self.collector.take(self.trace_id)))

    def _kept(self, ended: list[ReadableSpan]) -> list[SpanRecord]:
        own = [span for span in ended if not (span.instrumentation_scope and span.instrumentation_scope.name == SCOPE)]
        room = max(0, self.max_spans - self.kept)
        self.dropped += max(0, len(own) - room)
        kept = [span_record(span) for span in own[:room]]
        self.kept += len(kept)
        return kept

    def close(self) -> None:
        """End the root span and stop collecting the trace."""
        self.root.end()
        self.collector.forget(self.trace_id)


def span_record(span: ReadableSpan) -> SpanRecord:
    """``span`` as the results keep it: ids in hex, times in seconds and milliseconds, its
    attributes with every secret masked, then long values cut (never a piece of a secret)."""
    from farm.secrets import process_scrubber

    context, parent = span.context, span.parent
    assert context is not None
    scrub = process_scrubber().scrub
    attributes = {key: _kept_value(value, scrub) for key, value in (span.attributes or {}).items()}
    operation = attributes.get("gen_ai.operation.name")
    tool = attributes.get("gen_ai.tool.name")
    if operation == "execute_tool" and not tool and span.name.startswith("execute_tool "):
        tool = span.name.removeprefix("execute_tool ").strip()
    start, end = span.start_time or 0, span.end_time or span.start_time or 0
    code = span.status.status_code.name.lower() if span.status is not None else "unset"
    return SpanRecord(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        operation=operation if isinstance(operation, str) else None,
        tool_name=tool if isinstance(tool, str) else None,
        start=start / 1e9,
        duration_ms=round((end - start) / 1e6, 3),
        status=code if code in ("unset", "ok", "error") else "unset",  # type: ignore[arg-type]
        status_message=span.status.description if span.status is not None else None,
        attributes=attributes,
    )


def _kept_value(value: Any, scrub: Any) -> Any:
    """An attribute value as kept: strings masked, then cut; sequences item by item."""
    if isinstance(value, str):
        text = scrub(value)
        return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT] + "…"
    if isinstance(value, (tuple, list)):
        return [_kept_value(item, scrub) for item in value]
    return value


def arguments_of(span: SpanRecord) -> Any:
    """A tool span's arguments (``gen_ai.tool.call.arguments``, JSON text or a value), or None."""
    raw = span.attributes.get("gen_ai.tool.call.arguments")
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw
