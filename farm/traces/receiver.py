"""An OTLP/HTTP trace receiver: where a remote agent under test exports its spans (docs/traces.md).

``POST /v1/traces`` takes an ``ExportTraceServiceRequest`` as protobuf or as OTLP's JSON (gzip
too), decoded with the official ``opentelemetry-proto``, and answers as OTLP says: 200 with an
empty export response, 400 for a body it cannot decode, 413 for one over ``max_body`` bytes. It
keeps only the spans whose trace is a case run of this run (:class:`~farm.traces.capture.Collector`
watches them) and counts the others. It serves on its own threads, so a slow or broken exporter
never holds a conversation up.

On the local engine the receiver feeds the process's collector; on the ray engine it passes each
request's spans on to the run's trace desk (:mod:`farm.actors.traces`), which the session actors
ask for their turns' spans: the agent exports to one address whichever actor runs its case.
"""

from __future__ import annotations

import base64
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from farm.results import SpanRecord
from farm.traces.capture import record

__all__ = ["Receiver", "SpanSink", "decode", "records"]

PATH = "/v1/traces"


class SpanSink(Protocol):
    """What the receiver hands the spans it decoded: :class:`~farm.traces.capture.Collector`, or the
    ray engine's forwarder to its desk."""

    def add_all(self, spans: list[tuple[int, SpanRecord]]) -> int:
        """Take each ``(trace id, span)``; how many were kept (of a trace of this run)."""
        ...


class Receiver:
    """The run's OTLP/HTTP receiver on ``host:port`` (port 0: a free one), feeding ``sink``."""

    def __init__(self, sink: SpanSink, host: str = "127.0.0.1", port: int = 0, max_body: int = 8 << 20):
        self.sink = sink
        self.max_body = max_body
        self.kept = 0
        self.dropped = 0
        """Spans of traces that are no case run of this run."""
        self.refused = 0
        """Requests answered 400 or 413."""
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The receiver's base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Receiver:
        self._thread = threading.Thread(target=self._server.serve_forever, name="farm-otlp-receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def take(self, body: bytes, content_type: str) -> int:
        """Keep the spans of one export request's ``body``; how many were kept."""
        spans = records(decode(body, content_type))
        kept = self.sink.add_all(spans) if spans else 0
        dropped = len(spans) - kept
        with self._lock:
            self.kept += kept
            self.dropped += dropped
        return kept

    def refuse(self) -> None:
        """Count a request answered 400 or 413 (from any of the server's threads)."""
        with self._lock:
            self.refused += 1


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802  (the standard library's name)
            if self.path.split("?", 1)[0] != PATH:
                self._answer(404, b"", "text/plain", close=True)
                return
            size = int(self.headers.get("Content-Length") or 0)
            if size > receiver.max_body:
                receiver.refuse()
                self._answer(413, b"", "text/plain", close=True)  # its body is left unread
                return
            body = self.rfile.read(size)
            content_type = (self.headers.get("Content-Type") or "application/x-protobuf").split(";")[0].strip()
            try:
                if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                    body = _gunzip(body, receiver.max_body)
                receiver.take(body, content_type)
            except _TooLarge:
                receiver.refuse()
                self._answer(413, b"", "text/plain", close=True)
                return
            except Exception:  # a body that is no export request, whatever the decoder says of it
                receiver.refuse()
                self._answer(400, b"", "text/plain")
                return
            if content_type == "application/json":
                self._answer(200, b"{}", "application/json")
            else:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

                self._answer(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

        def _answer(self, status: int, body: bytes, content_type: str, close: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the standard library's name)
            """Say nothing: the standard library would print a line to stderr for each export batch."""

    return Handler


class _TooLarge(Exception):
    pass


def _gunzip(body: bytes, limit: int) -> bytes:
    """``body`` unzipped, never past ``limit`` bytes (a small gzip can unpack to gigabytes)."""
    unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = unzip.decompress(body, limit + 1)
    if len(out) > limit or unzip.unconsumed_tail:
        raise _TooLarge
    return out


def decode(body: bytes, content_type: str) -> Any:
    """An ``ExportTraceServiceRequest`` from protobuf, or from OTLP's JSON (whose ids are hex)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    if content_type != "application/json":
        return ExportTraceServiceRequest.FromString(body)
    from google.protobuf import json_format

    data = json.loads(body)
    for resource in data.get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(data, ExportTraceServiceRequest())


def records(request: Any) -> list[tuple[int, SpanRecord]]:
    """Each span of an export request with its trace id: masked and cut as an in-process span is."""
    from farm.secrets import process_scrubber

    scrub = process_scrubber().scrub
    out = []
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                kept = record(
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex() or None,
                    name=span.name,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status={1: "ok", 2: "error"}.get(span.status.code, "unset"),
                    status_message=span.status.message,
                    attributes={kv.key: _value(kv.value) for kv in span.attributes},
                    scrub=scrub,
                )
                out.append((int.from_bytes(span.trace_id, "big"), kept))
    return out


def _value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as Python."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None
