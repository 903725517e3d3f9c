"""Every case run out as a trace (``--otlp``), on OpenTelemetry's GenAI conventions (docs/traces.md).

:class:`OTLPExport` is a results writer: each case run, once it ended, becomes one trace, built
with the official SDK and sent with the official OTLP/HTTP exporters:

- a root span per case run (``test.case.name``, ``test.suite.name``, ``test.case.result.status``,
  the run id, the agent, the try);
- an ``invoke_agent`` span per turn, with the span id the agent's ``traceparent`` named, and the
  GenAI attributes the farm knows (model, usage, finish reason; the messages with ``content``);
- the agent's spans the run captured, beneath their turns, with their own ids;
- the simulator's, the judges' and the attributor's calls as ``chat`` spans (a generator's
  calls belong to no case run: they are not sent);
- one ``gen_ai.evaluation.result`` per assertion and checkpoint, parented to the turn it judged
  (the case run's root for a final assertion or a checkpoint): a log record with that span's
  context, sent to ``/v1/logs``, and the same as a span event, for backends that read traces only.

Off the run's path: :meth:`OTLPExport.write` only queues the result (a bounded queue: what does
not fit is counted); a process of its own builds and sends the batches. A collector that fails a
batch (after the exporter's own retries) is taken as gone for the rest of the run: what was not
delivered is counted, and :meth:`OTLPExport.close` says so in one warning line. No case's status
depends on it. The results reach the writer masked of every secret (:class:`MultiWriter`), so
every attribute is.
"""

from __future__ import annotations

import json
import logging
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.trace import Span
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Tracer

from farm.results import AssertionResult, CaseResult, RoleCall, Status, TurnResult
from farm.results._suites import LINE
from farm.traces.parent import new_span_id, new_trace_id

__all__ = ["CLOSE_WAIT_S", "QUEUE_CASES", "OTLPExport", "SCOPE"]

SCOPE = "agent-test-farm"
"""The instrumentation scope of every span and log record the export sends."""

QUEUE_CASES = 10_000
"""The most case runs waiting to be sent; a result beyond them is counted and not sent."""

BATCH_SPANS = 512
"""Spans per request to the collector (the SDK's batch size)."""

SEND_EVERY_S = 1.0
"""The longest a built span waits to be sent (seconds)."""

CLOSE_WAIT_S = 10.0
"""How long the end of a run waits for what is left to be sent (seconds)."""

EXPORT_TIMEOUT_S = 5.0
"""Each request's time limit, the exporter's retries included (seconds)."""

EVALUATION = "gen_ai.evaluation.result"
"""The GenAI conventions' event name of one verdict."""

_STATUS = {Status.PASSED: "pass", Status.FAILED: "fail", Status.ERROR: "fail", Status.TIMEOUT: "fail"}
"""``test.case.result.status`` (OpenTelemetry's ``pass``/``fail``) of each farm status; a skipped case has none."""

_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.sdk")


class OTLPExport:
    """The writer of ``--otlp``: each case run sent to ``endpoint`` (a base URL) as a trace.

    The traces are built and sent by a process of its own (:func:`main`), so that a run pays
    for a result's JSON and no more: the driver is the run's busiest process. A thread hands
    the queued results to it; another reads what it says it sent.

    ``models``: each agent's model, where its connector names one; ``content``: the turns carry
    their messages (``--otlp-content``); ``warn``: where the one line about what was not
    delivered goes (standard error); ``queue_cases`` and ``close_wait``: :data:`QUEUE_CASES` and
    :data:`CLOSE_WAIT_S`."""

    def __init__(
        self,
        endpoint: str,
        run_id: str,
        models: dict[str, str | None] | None = None,
        content: bool = False,
        warn: TextIO | None = None,
        queue_cases: int = QUEUE_CASES,
        close_wait: float = CLOSE_WAIT_S,
    ):
        self.endpoint = endpoint
        self.warn = warn
        self.written = 0
        self.overflow = 0
        """Case runs that found the queue full, and were not sent."""
        self.sent = 0
        self.dropped = 0
        """Every case run not delivered, once :meth:`close` ran."""
        self.reason: str | None = None
        self._queue: queue.Queue[CaseResult | None] = queue.Queue(queue_cases)
        self._closed = False
        self._close_wait = close_wait
        # started now: its imports overlap the run's start, not its first results
        setup = {"endpoint": endpoint, "run_id": run_id, "models": models or {}, "content": content}
        command = [sys.executable, "-m", "farm.traces.export", json.dumps(setup)]
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        threading.Thread(target=self._feed, name="farm-otlp-feed", daemon=True).start()
        self._hearing = threading.Thread(target=self._hear, name="farm-otlp-hear", daemon=True)
        self._hearing.start()

    # the ResultWriter interface

    def write(self, result: CaseResult) -> None:
        self.written += 1
        try:
            self._queue.put_nowait(result)
        except queue.Full:
            self.overflow += 1

    def flush(self) -> None:
        """Nothing: the export sends on its own schedule, and :meth:`close` waits for it."""

    def close(self) -> None:
        """Send what is left (waiting at most ``close_wait``), then say in one line what was not delivered."""
        if self._closed:
            return
        self._closed = True
        self._finish(time.monotonic() + self._close_wait)
        self.dropped = self.written - self.sent
        if self.dropped:
            reasons = [f"{self.overflow} found the queue full"] if self.overflow else []
            reasons += [self.reason] if self.reason and self.dropped > self.overflow else []
            print(f"warning: --otlp {self.endpoint}: {self.dropped} of {self.written} case runs were not delivered ({'; '.join(reasons)})", file=self.warn or sys.stderr)

    def _feed(self) -> None:
        """Each queued result to the export process, as a line of JSON; its stdin closed at the end."""
        pipe = self._process.stdin
        assert pipe is not None
        try:
            while (result := self._queue.get()) is not None:
                pipe.write(result.model_dump_json().encode() + b"\n")
                if self._queue.empty():
                    pipe.flush()
            pipe.close()
        except (BrokenPipeError, ValueError, OSError):  # the process ended: what it did not take is counted at the end
            pass

    def _hear(self) -> None:
        """What the export process says: ``sent N`` or ``failed N <why>`` after each send."""
        assert self._process.stdout is not None
        for line in self._process.stdout:
            said, _, rest = line.decode(errors="replace").strip().partition(" ")
            count, _, why = rest.partition(" ")
            if said == "sent":
                self.sent += int(count)
            elif said == "failed":  # what it did not send is counted at the end, from what it sent
                self.reason = self.reason or why

    def _finish(self, deadline: float) -> None:
        while True:  # the end's mark goes in even when the queue is full: the feed empties it
            try:
                self._queue.put(None, timeout=0.1)
                break
            except queue.Full:
                if time.monotonic() >= deadline or self._process.poll() is not None:
                    break
        try:
            self._process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            self.reason = self.reason or f"not sent within {self._close_wait:g} s of the run's end"
        self._hearing.join(5)
        if self._process.returncode not in (0, -9) and self.reason is None:
            self.reason = f"the export stopped (exit code {self._process.returncode})"


def main(argv: list[str] | None = None) -> None:
    """The export process: results as JSON lines on stdin, each case run sent as a trace; after
    each send one line on stdout, ``sent N`` or ``failed N <why>``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the run, whose results it goes on sending
    setup = json.loads((argv or sys.argv[1:])[0])
    results: queue.Queue[CaseResult | None] = queue.Queue(QUEUE_CASES)

    def read() -> None:
        for line in sys.stdin.buffer:
            results.put(CaseResult.model_validate_json(line))
        results.put(None)

    threading.Thread(target=read, daemon=True).start()
    _Exporting(setup).run(results)


class _Exporting:
    """The export process's loop: build each case run's trace, send a batch at :data:`BATCH_SPANS`
    spans or every :data:`SEND_EVERY_S`."""

    def __init__(self, setup: dict[str, Any]):
        self.sender = _Sender(setup["endpoint"])
        self.builder = _Builder(self.sender, setup["run_id"], setup["models"], setup["content"])
        self.built = 0

    def run(self, results: queue.Queue[CaseResult | None]) -> None:
        last = time.monotonic()
        with self.sender.quiet():
            while True:
                try:
                    result: CaseResult | None | bool = results.get(timeout=SEND_EVERY_S)
                except queue.Empty:
                    result = False
                if isinstance(result, CaseResult):
                    self.builder.case(result)
                    self.built += 1
                if result is None or len(self.sender.spans) >= BATCH_SPANS or (self.built and time.monotonic() - last >= SEND_EVERY_S):
                    self.send()
                    last = time.monotonic()
                if result is None:
                    self.sender.shutdown()
                    return

    def send(self) -> None:
        cases, self.built = self.built, 0
        if cases:
            said = f"sent {cases}" if self.sender.send() else f"failed {cases} {self.sender.reason}"
            print(said, flush=True)


class _Sender:
    """The official OTLP/HTTP span and log exporters, and the spans and records built since the last send."""

    def __init__(self, endpoint: str):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        self.span_exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=EXPORT_TIMEOUT_S)  # headers: OTEL_EXPORTER_OTLP_HEADERS
        self.log_exporter = OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=EXPORT_TIMEOUT_S)
        self.spans: list[Any] = []
        self.logs: list[Any] = []
        self.reason: str | None = _unreachable(endpoint)
        self.gone = self.reason is not None
        self._said: list[str] = []

    def send(self) -> bool:
        """Send what was built; whether the collector took it (once it failed, nothing more is tried)."""
        spans, logs = self.spans[:], self.logs[:]
        self.spans.clear()  # in place: the builder's processors append to these lists
        self.logs.clear()
        if self.gone:
            return False
        ok = all(self.span_exporter.export(spans[i : i + BATCH_SPANS]) == SpanExportResult.SUCCESS for i in range(0, len(spans), BATCH_SPANS))
        if ok and logs:
            ok = self.log_exporter.export(logs) == LogRecordExportResult.SUCCESS
        if not ok:
            self.gone, self.reason = True, _reason(self._said)
        return ok

    def shutdown(self) -> None:
        self.span_exporter.shutdown()
        self.log_exporter.shutdown()

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The exporters' own log lines (one per retry, with a traceback) kept from the console:
        the export says in one line what went wrong, at the end."""
        handler = _Said(self._said)
        loggers = [logging.getLogger(name) for name in _EXPORTER_LOGGERS]
        before = [each.propagate for each in loggers]
        for each in loggers:
            each.addHandler(handler)
            each.propagate = False
        try:
            yield
        finally:
            for each, propagate in zip(loggers, before, strict=True):
                each.removeHandler(handler)
                each.propagate = propagate


def _unreachable(endpoint: str) -> str | None:
    """Why nothing listens at ``endpoint`` (a connection refused at once, say), or None: a collector
    that is not there costs the run no exporter's retries, which would wait seconds for it."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(endpoint)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((url.hostname or "127.0.0.1", port), timeout=2.0):
            return None
    except (OSError, ValueError) as exc:
        return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).lower()


class _Said(logging.Handler):
    def __init__(self, said: list[str]):
        super().__init__(logging.WARNING)
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.said) < 20:
            self.said.append(record.getMessage())


def _reason(said: list[str]) -> str:
    """Why a batch failed, in a few words, from what the exporter logged."""
    for line in said:
        found = re.search(r"\[Errno -?\d+\] ([^\"')\]]+)", line)
        if found:
            return found.group(1).strip().lower()
        found = re.search(r"code: (\d{3})", line) or re.search(r"status code (\d{3})", line)
        if found:
            return f"the collector answered {found.group(1)}"
    return "the collector did not take them"


class _Builder:
    """Builds one case run's spans and evaluation records with the SDK, with the ids the run used."""

    def __init__(self, sender: _Sender, run_id: str, models: dict[str, str | None], content: bool):
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        resource = Resource.create({"service.name": "agent-test-farm"})
        self.ids = _PresetIds()
        provider = TracerProvider(resource=resource, id_generator=self.ids, shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(_SpansInto(sender.spans.append)))
        logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logs.add_log_record_processor(SimpleLogRecordProcessor(_LogsInto(sender.logs.append)))
        self.tracer: Tracer = provider.get_tracer(SCOPE)
        self.logger = logs.get_logger(SCOPE)
        self.run_id, self.models, self.content = run_id, models, content

    def case(self, result: CaseResult) -> None:
        start = _ns(result.started_at) or time.time_ns()
        end = start + int(result.duration_ms * 1e6)
        trace_id = int(result.trace_id or new_trace_id(), 16)
        root = self._start(f"case {result.id}", trace_id, None, start, self._case_attributes(result))
        for turn in result.turns:
            self._turn(result, turn, trace_id, root, start)
        for call in result.role_log:
            self._role_call(call, trace_id, root)
        for assertion in result.final_assertions:
            self._evaluation(root, assertion, assertion.type, end)
        for checkpoint in result.checkpoints:
            score = checkpoint.assertion or AssertionResult(type="checkpoint", passed=checkpoint.reached)
            self._evaluation(root, score.model_copy(update={"passed": checkpoint.reached}), f"checkpoint {checkpoint.id}", end)
        if result.status in (Status.ERROR, Status.TIMEOUT):
            _error(root, result.error)
        root.end(end)

    def _case_attributes(self, result: CaseResult) -> dict[str, Any]:
        attributes = {
            "test.case.name": result.id,
            "test.suite.name": LINE.sub("", result.source or ""),
            "test.case.result.status": _STATUS.get(Status(result.status)),
            "farm.case.status": str(result.status),
            "farm.run.id": self.run_id,
            "farm.case.run_index": result.run_index,
            "farm.case.attempt": result.attempt,
            "gen_ai.agent.name": result.agent,
            "farm.case.error": result.error,
            "farm.case.blame": result.blame,
        }
        return {key: value for key, value in attributes.items() if value is not None and value != ""}

    def _turn(self, result: CaseResult, turn: TurnResult, trace_id: int, root: Span, case_start: int) -> None:
        start = _ns(turn.started_at) or case_start
        end = start + int((turn.duration_ms + turn.queued_ms) * 1e6)
        span = self._start(f"invoke_agent {result.agent or ''}".strip(), trace_id, root, start, self._turn_attributes(result, turn), turn.span_id)
        for captured in turn.spans:
            self._captured(captured, trace_id)
        for assertion in turn.assertions:
            self._evaluation(span, assertion, assertion.type, end)
        if turn.error:
            _error(span, turn.error)
        span.end(end)

    def _turn_attributes(self, result: CaseResult, turn: TurnResult) -> dict[str, Any]:
        model = self.models.get(result.agent or "")
        usage = turn.usage
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": result.agent,
            "gen_ai.request.model": model,
            "gen_ai.usage.input_tokens": usage.prompt_tokens or None,
            "gen_ai.usage.output_tokens": usage.completion_tokens or None,
            "gen_ai.response.finish_reasons": None if turn.error else (["length"] if turn.truncated else ["stop"]),
            "farm.turn.number": turn.turn,
            "farm.turn.input_source": turn.input_source,
            "farm.turn.tool_calls": len(turn.tool_calls) or None,
        }
        if self.content:
            attributes["gen_ai.input.messages"] = json.dumps([{"role": "user", "parts": [_part(turn.input)]}], ensure_ascii=False)
            attributes["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": [_part(turn.output)]}], ensure_ascii=False)
        return {key: value for key, value in attributes.items() if value is not None}

    def _role_call(self, call: RoleCall, trace_id: int, root: Span) -> None:
        """A call of the simulator, a judge or the attributor: a ``chat`` span of the case run."""
        model = self.models.get(call.agent)
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "farm.role": call.role, "farm.role.agent": call.agent, "farm.turn.number": call.turn}
        start = _ns(call.started_at) or time.time_ns()
        span = self._start(f"chat {model}" if model else "chat", trace_id, root, start, {key: value for key, value in attributes.items() if value is not None})
        if call.error:
            _error(span, call.error)
        span.end(start + int(call.duration_ms * 1e6))

    def _captured(self, captured: Any, trace_id: int) -> None:
        """One of the agent's spans as the run captured it: its own ids, parent, times and status."""
        start = int(captured.start * 1e9)
        span = self._start(captured.name, trace_id, captured.parent_span_id, start, dict(captured.attributes), captured.span_id)
        if captured.status == "error":
            _error(span, captured.status_message)
        span.end(start + int(captured.duration_ms * 1e6))

    def _evaluation(self, span: Span, assertion: AssertionResult, name: str, at: int) -> None:
        """One verdict: a ``gen_ai.evaluation.result`` event on ``span`` and a log record in its context."""
        from opentelemetry import trace
        from opentelemetry._logs import LogRecord

        explanation = assertion.message or assertion.reason
        attributes = {
            "gen_ai.evaluation.name": name,
            "gen_ai.evaluation.score.value": float(assertion.score) if assertion.score is not None else (1.0 if assertion.passed else 0.0),
            "gen_ai.evaluation.score.label": "passed" if assertion.passed else "failed",
            **({"gen_ai.evaluation.explanation": explanation} if explanation else {}),
            **({"error.type": "farm.evaluation_error"} if assertion.error else {}),
        }
        span.add_event(EVALUATION, attributes, timestamp=at)
        self.logger.emit(LogRecord(timestamp=at, context=trace.set_span_in_context(span), event_name=EVALUATION, attributes=attributes))

    def _start(self, name: str, trace_id: int, parent: Span | str | None, start: int, attributes: dict[str, Any], span_id: str | None = None) -> Span:
        """A span with the given ids: ``parent`` a span built here, another span's id (hex), or None (the root)."""
        from opentelemetry import trace
        from opentelemetry.context import Context
        from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

        if parent is None:
            context = Context()
        elif isinstance(parent, str):
            context = trace.set_span_in_context(NonRecordingSpan(SpanContext(trace_id, int(parent, 16), False, TraceFlags(TraceFlags.SAMPLED))))
        else:
            context = trace.set_span_in_context(parent)
        self.ids.next(trace_id, int(span_id or new_span_id(), 16))
        kind = SpanKind.CLIENT if name.startswith(("invoke_agent", "chat")) else SpanKind.INTERNAL
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=start)  # type: ignore[return-value]


class _PresetIds(IdGenerator):
    """The SDK's id generator, handing out the ids the run used (:meth:`next`) instead of new ones."""

    def __init__(self) -> None:
        self._trace_id = 0
        self._span_id = 0

    def next(self, trace_id: int, span_id: int) -> None:
        self._trace_id, self._span_id = trace_id, span_id

    def generate_trace_id(self) -> int:
        return self._trace_id

    def generate_span_id(self) -> int:
        return self._span_id

    def is_trace_id_random(self) -> bool:
        return True


class _SpansInto(SpanExporter):
    """An SDK exporter that hands each ended span to ``add`` (the sender's batch)."""

    def __init__(self, add: Callable[[Any], None]):
        self.add = add

    def export(self, spans: Any) -> SpanExportResult:
        for each in spans:
            self.add(each)
        return SpanExportResult.SUCCESS


class _LogsInto(LogRecordExporter):
    """An SDK exporter that hands each emitted record to ``add`` (the sender's batch)."""

    def __init__(self, add: Callable[[Any], None]):
        self.add = add

    def export(self, batch: Any) -> LogRecordExportResult:
        for each in batch:
            self.add(each)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _error(span: Span, message: str | None) -> None:
    from opentelemetry.trace import Status as SpanStatus
    from opentelemetry.trace import StatusCode

    span.set_status(SpanStatus(StatusCode.ERROR, message or None))


def _part(value: Any) -> dict[str, Any]:
    """One message part of the GenAI conventions' ``gen_ai.*.messages``."""
    return {"type": "text", "content": value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}


def _ns(seconds: float | None) -> int | None:
    return int(seconds * 1e9) if seconds else None


if __name__ == "__main__":
    main()
