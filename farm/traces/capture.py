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

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from farm.errors import FarmError
from farm.results import SpanRecord
from farm.traces.parent import parent_of_requests

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Span
    from opentelemetry.trace import Tracer

__all__ = ["SCOPE", "CaseTrace", "Collector", "ReceivedSpans", "TurnSpans", "arguments_of", "collector", "kept_value", "record", "span_record"]

SCOPE = "agent-test-farm"
"""The instrumentation scope of the farm's own spans (the case run's root, a turn's ``invoke_agent``)."""

VALUE_LIMIT = 2000
"""The longest attribute value kept, in characters (after secrets are masked)."""

HELD_LIMIT = 100_000
"""The most spans a collector holds for traces not watched yet (:attr:`Collector.hold`)."""


class ReceivedSpans(Protocol):
    """Where a remote agent's spans arrive, by trace id: the process's :class:`Collector` (the local
    engine's receiver feeds it), or the ray engine's desk, which sessions ask across processes."""

    def watch(self, trace_id: int) -> None: ...

    async def settle(self, trace_id: int, turn_span_id: str, wait: float, quiet: float = 0.2, arrived: bool = False) -> list[SpanRecord]: ...

    def forget(self, trace_id: int) -> None: ...


class Collector(SpanProcessor):
    """Keeps the spans of the traces it watches, by trace id: those the process's tracer provider
    ends (it is a span processor there) and those the OTLP receiver is sent
    (:mod:`farm.traces.receiver`). The farm's own spans are not kept."""

    def __init__(self, hold: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._traces: dict[int, _Trace] = {}
        self.hold = hold
        """Seconds a span of a trace not watched (yet) is held for a :meth:`watch` that may be on its
        way (0: dropped at once). The ray engine's desk holds them: a session's word that it watches
        a trace travels apart from the spans, and may come second."""
        self._held: dict[int, tuple[float, list[SpanRecord]]] = {}
        self._held_count = 0
        self.expired = 0
        """Spans held for a watch that never came, and dropped."""

    def watch(self, trace_id: int) -> None:
        with self._lock:
            found = self._traces.setdefault(trace_id, _Trace())
            _, held = self._held.pop(trace_id, (0.0, []))
            if held:
                self._held_count -= len(held)
                found.pending.extend(held)
                found.last = time.monotonic()

    def watching(self, trace_id: int) -> bool:
        with self._lock:
            return trace_id in self._traces

    def add(self, trace_id: int, span: SpanRecord) -> bool:
        """Keep ``span`` if its trace is watched (or hold it a while, see :attr:`hold`); whether it was."""
        now = time.monotonic()
        with self._lock:
            found = self._traces.get(trace_id)
            if found is None:
                return self._held_for_watch(trace_id, span, now)
            found.pending.append(span)
            found.last = now
            return True

    def add_all(self, spans: list[tuple[int, SpanRecord]]) -> int:
        """:meth:`add` each ``(trace id, span)``; how many were kept."""
        return sum(self.add(trace_id, span) for trace_id, span in spans)

    def _held_for_watch(self, trace_id: int, span: SpanRecord, now: float) -> bool:
        if self.hold <= 0:
            return False
        for stale in [key for key, (since, _) in self._held.items() if now - since > self.hold]:
            dropped = len(self._held.pop(stale)[1])
            self._held_count -= dropped
            self.expired += dropped
        if self._held_count >= HELD_LIMIT:
            self.expired += 1
            return False
        self._held.setdefault(trace_id, (now, []))[1].append(span)
        self._held_count += 1
        return True

    def take(self, trace_id: int, turn_span_id: str) -> list[SpanRecord]:
        """The spans that descend from the turn's span ``turn_span_id`` (hex) and were not taken
        yet, in the order they arrived; the others wait for their own turn (or their parent)."""
        with self._lock:
            found = self._traces.get(trace_id)
            return found.take(turn_span_id) if found is not None else []

    def last_arrival(self, trace_id: int) -> float | None:
        with self._lock:
            found = self._traces.get(trace_id)
            return found.last if found is not None else None

    def forget(self, trace_id: int) -> None:
        with self._lock:
            self._traces.pop(trace_id, None)

    async def settle(self, trace_id: int, turn_span_id: str, wait: float, quiet: float = 0.2, arrived: bool = False) -> list[SpanRecord]:
        """The spans of the turn ``turn_span_id`` that arrive within ``wait`` seconds, once they
        settle: some have (or had before: ``arrived``) and none came for ``quiet`` seconds (a remote
        agent's exporter sends in batches)."""
        deadline = time.monotonic() + wait
        taken: list[SpanRecord] = []
        while True:
            taken += self.take(trace_id, turn_span_id)
            last = self.last_arrival(trace_id)
            now = time.monotonic()
            if now >= deadline or ((taken or arrived) and last is not None and now - last >= quiet):
                return taken
            await asyncio.sleep(min(0.05, max(0.0, deadline - now)))

    # the SpanProcessor interface

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or (span.instrumentation_scope is not None and span.instrumentation_scope.name == SCOPE):
            return
        if self.watching(context.trace_id):
            self.add(context.trace_id, span_record(span))

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class _Trace:
    """The spans of one watched trace: those not taken yet, and every span's parent, by span id."""

    def __init__(self) -> None:
        self.pending: list[SpanRecord] = []
        self.parents: dict[str, str | None] = {}
        self.last: float | None = None
        """When a span of the trace last arrived (monotonic)."""

    def take(self, turn_span_id: str) -> list[SpanRecord]:
        for span in self.pending:
            self.parents[span.span_id] = span.parent_span_id
        taken: list[SpanRecord] = []
        kept: list[SpanRecord] = []
        for span in self.pending:
            (taken if self._descends(span, turn_span_id) else kept).append(span)
        self.pending = kept
        return taken

    def _descends(self, span: SpanRecord, ancestor: str) -> bool:
        parent, seen = span.parent_span_id, 0
        while parent is not None and seen < 256:  # a cycle in what an agent sent ends here
            if parent == ancestor:
                return True
            parent, seen = self.parents.get(parent), seen + 1
        return False


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


class TurnSpans:
    """One turn's span id (hex) and the agent's spans of the turn, as they arrive."""

    def __init__(self, span_id: str):
        self.span_id = span_id
        self.spans: list[SpanRecord] = []


class CaseTrace:
    """One case run's trace: its root span, a span per turn, and the agent's spans by turn.

    ``max_spans``: the most spans kept for the case run; the rest are counted in ``dropped``."""

    def __init__(self, case_id: str, agent: str, conversation_id: str, max_spans: int, received: ReceivedSpans | None = None):
        from opentelemetry.context import Context

        self.collector, self.tracer = collector()
        self.received = received
        """Where a remote agent's spans arrive when not in this process's collector (the ray engine's desk)."""
        self.agent, self.conversation_id = agent, conversation_id
        self.root = self.tracer.start_span(f"case {case_id}", context=Context(), attributes={"test.case.name": case_id})
        self.trace_id = self.root.get_span_context().trace_id
        self.collector.watch(self.trace_id)
        if received is not None:
            received.watch(self.trace_id)
        self.max_spans = max_spans
        self.kept = 0
        self.dropped = 0

    @contextmanager
    def turn(self) -> Iterator[TurnSpans]:
        """A span for one turn, current while the agent is called (and named in the ``traceparent``
        of its requests); its :class:`TurnSpans` are filled with the agent's spans of the turn."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent, "gen_ai.conversation.id": self.conversation_id}
        parent = trace.set_span_in_context(self.root)
        with self.tracer.start_as_current_span(f"invoke_agent {self.agent}", context=parent, kind=SpanKind.CLIENT, attributes=attributes) as span:
            turn = TurnSpans(format(span.get_span_context().span_id, "016x"))
            with parent_of_requests(f"{self.trace_id:032x}", turn.span_id):
                yield turn
        self.collect(turn)

    def collect(self, turn: TurnSpans) -> None:
        """Add the turn's spans that have arrived since it last looked."""
        turn.spans.extend(self._kept(self.collector.take(self.trace_id, turn.span_id)))

    async def settle(self, turn: TurnSpans, wait: float, quiet: float = 0.2) -> None:
        """Wait, up to ``wait`` seconds, for a remote agent's spans of ``turn`` to arrive and settle:
        until some have and none came for ``quiet`` seconds (its exporter sends in batches)."""
        self.collect(turn)
        source = self.received or self.collector
        arrived = await source.settle(self.trace_id, turn.span_id, wait, quiet, arrived=bool(turn.spans))
        turn.spans.extend(self._kept(arrived))

    def _kept(self, arrived: list[SpanRecord]) -> list[SpanRecord]:
        room = max(0, self.max_spans - self.kept)
        self.dropped += max(0, len(arrived) - room)
        kept = arrived[:room]
        self.kept += len(kept)
        return kept

    def close(self) -> None:
        """End the root span and stop collecting the trace."""
        self.root.end()
        self.collector.forget(self.trace_id)
        if self.received is not None:
            self.received.forget(self.trace_id)


def span_record(span: ReadableSpan) -> SpanRecord:
    """An in-process span as the results keep it (:func:`record`)."""
    from farm.secrets import process_scrubber

    context, parent = span.context, span.parent
    assert context is not None
    start = span.start_time or 0
    status = span.status.status_code.name.lower() if span.status is not None else "unset"
    return record(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        start_ns=start,
        end_ns=span.end_time or start,
        status=status,
        status_message=span.status.description if span.status is not None else None,
        attributes=dict(span.attributes or {}),
        scrub=process_scrubber().scrub,
    )


def record(
    *,
    trace_id: str,
    span_id: str,
    parent_span_id: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    status: str,
    status_message: str | None,
    attributes: dict[str, Any],
    scrub: Callable[[str], str],
) -> SpanRecord:
    """A span, in-process or received, as the results keep it: ids in hex, times in seconds and
    milliseconds, the GenAI operation and tool name read from its attributes, which are masked of
    every secret with ``scrub`` and then cut (never a piece of a secret)."""
    kept = {key: kept_value(value, scrub) for key, value in attributes.items()}
    operation = kept.get("gen_ai.operation.name")
    tool = kept.get("gen_ai.tool.name")
    if operation == "execute_tool" and not tool and name.startswith("execute_tool "):
        tool = name.removeprefix("execute_tool ").strip()
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        name=name,
        operation=operation if isinstance(operation, str) else None,
        tool_name=tool if isinstance(tool, str) else None,
        start=start_ns / 1e9,
        duration_ms=round(max(0, end_ns - start_ns) / 1e6, 3),
        status=status if status in ("unset", "ok", "error") else "unset",  # type: ignore[arg-type]
        status_message=status_message or None,
        attributes=kept,
    )


def kept_value(value: Any, scrub: Any) -> Any:
    """An attribute value as kept: strings masked, then cut; sequences item by item."""
    if isinstance(value, str):
        text = scrub(value)
        return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT] + "…"
    if isinstance(value, (tuple, list)):
        return [kept_value(item, scrub) for item in value]
    return value


def arguments_of(span: SpanRecord) -> Any:
    """A tool span's arguments (``gen_ai.tool.call.arguments``), parsed as a tool call's are."""
    from farm.agents.base import parse_arguments

    return parse_arguments(span.attributes.get("gen_ai.tool.call.arguments"))
