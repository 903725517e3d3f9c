"""Traces of a remote agent, end to end: an OpenAI-compatible agent on 127.0.0.1 reads each request's
``traceparent`` and exports its tool spans to the farm's OTLP/HTTP receiver with the official SDK
exporter; the trace assertions judge them as an in-process agent's, on both engines. The receiver
itself answers as OTLP says to a body it cannot use."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion
from farm.traces.capture import Collector
from farm.traces.receiver import Receiver


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TracedAgent:
    """An OpenAI-compatible agent whose tools are spans, exported with the official OTLP/HTTP
    exporter (batched, as agents do) to ``endpoint``; ``quiet`` messages export nothing."""

    def __init__(self, endpoint: str):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.provider = TracerProvider(resource=Resource.create({"service.name": "travel-service"}))  # its own, as a service has
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), schedule_delay_millis=100))
        self.tracer = self.provider.get_tracer("travel-service")
        self.parents: list[str | None] = []
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict, headers: dict[str, str]) -> Response:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        text = body["messages"][-1]["content"]
        carrier = {key.lower(): value for key, value in headers.items()}
        with self._lock:
            self.parents.append(carrier.get("traceparent"))
        if text.startswith("quiet"):
            return Response(chat_completion("no spans from me"))
        context = TraceContextTextMapPropagator().extract(carrier)
        with self.tracer.start_as_current_span("invoke_agent travel", context=context):
            for tool in ["search"] + (["book"] if "book" in text else []):
                with self.tracer.start_as_current_span(f"execute_tool {tool}") as span:
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("case.input", text)
        return Response(chat_completion(f"done: {text}"))


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str):
    """The agent exports to the one address the run's header printed, on both engines (on the ray
    engine the receiver passes the spans on to the actor that the session actors ask)."""
    port = free_port()
    agent = TracedAgent(f"http://127.0.0.1:{port}")
    with JSONServer(agent) as server:
        (tmp_path / "farm.toml").write_text(
            f"""
[farm]
default_agent = "travel"
results_dir = "results"
engine = "{engine}"
trace_receiver = "127.0.0.1:{port}"
trace_wait = 3.0

[connectors.travel]
base_url = "{server.url}/v1"

[agents.travel]
connector = "travel"
"""
        )
        monkeypatch.chdir(tmp_path)
        yield tmp_path, agent, port
    agent.provider.shutdown()


def run(project: Path, cases: list[dict], *args: str):
    (project / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", *args], catch_exceptions=False)
    (run_dir,) = (project / "results").iterdir()
    return result, {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def test_a_remote_agent_s_exported_spans_are_judged_and_none_lands_on_the_wrong_case(project):
    folder, agent, port = project
    cases = [
        {"id": f"{kind}-{i}", "input": f"{kind} {i}", "assertions": [{"type": "tool_executed", "name": "book"}]}
        for kind in ("book", "look") for i in range(50)
    ]  # fmt: skip
    result, by_id = run(folder, cases, "--parallel", "100")
    assert f"Traces: http://127.0.0.1:{port}" in result.output
    assert result.exit_code == 1, result.output
    for case_id, record in by_id.items():
        assert record["status"] == ("passed" if case_id.startswith("book") else "failed"), (case_id, record["error"])
        spans = record["turns"][0]["spans"]
        assert {span["attributes"]["case.input"] for span in spans if span["operation"] == "execute_tool"} == {record["turns"][0]["input"]}
        assert len({span["trace_id"] for span in spans}) == 1
    assert by_id["look-0"]["error"] == "turn 1: expected a call of tool 'book', found 0; this turn called: search"
    assert all(parent and parent.startswith("00-") for parent in agent.parents)  # every request named its trace


def test_a_remote_agent_that_exports_nothing_is_an_error_naming_the_receiver(project):
    folder, _, port = project
    result, by_id = run(folder, [{"id": "quiet", "input": "quiet please", "assertions": [{"type": "no_error_spans"}]}])
    assert result.exit_code == 1
    assert by_id["quiet"]["status"] == "error"
    assert by_id["quiet"]["error"] == (
        "the agent emitted no OpenTelemetry spans: is it instrumented? "
        f"(none reached the farm's receiver at http://127.0.0.1:{port}) (docs/traces.md)"
    )


def post(url: str, body: bytes, content_type: str, encoding: str | None = None) -> int:
    headers = {"Content-Type": content_type, **({"Content-Encoding": encoding} if encoding else {})}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_receiver_answers_as_otlp_says_and_keeps_only_this_run_s_traces():
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    collector = Collector()
    watched, other = 0xAB, 0xCD
    collector.watch(watched)
    spans = [{"traceId": f"{trace:032x}", "spanId": f"{n + 1:016x}", "parentSpanId": "00000000000000ff", "name": "execute_tool search", "startTimeUnixNano": "1000", "endTimeUnixNano": "3000000",
              "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}}]} for n, trace in enumerate([watched, other])]  # fmt: skip
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()
    with Receiver(collector, max_body=4096) as receiver:
        url = f"{receiver.url}/v1/traces"
        assert post(url, body, "application/json") == 200
        assert post(url, gzip.compress(body), "application/json", "gzip") == 200
        proto = ExportTraceServiceRequest()
        proto.resource_spans.add().scope_spans.add().spans.add(trace_id=bytes.fromhex(f"{watched:032x}"), span_id=b"\x00" * 7 + b"\x09", name="chat")
        assert post(url, proto.SerializeToString(), "application/x-protobuf") == 200
        assert post(url, b"not protobuf \xff", "application/x-protobuf") == 400
        assert post(url, b"{", "application/json") == 400
        assert post(url, b"x" * 5000, "application/x-protobuf") == 413
        assert post(url, gzip.compress(b"\x00" * 100_000), "application/x-protobuf", "gzip") == 413  # small, but too large unzipped
        assert post(url, body, "application/json") == 200  # the run goes on
        assert (receiver.kept, receiver.dropped, receiver.refused) == (4, 3, 4)
    taken = collector.take(watched, "00000000000000ff")  # the three JSON spans of the watched trace descend from that turn
    assert [(span.name, span.operation, span.tool_name, span.duration_ms) for span in taken] == [("execute_tool search", "execute_tool", "search", 2.999)] * 3
    assert collector.take(watched, "00000000000000ff") == []


def span(trace_id: int, n: int, parent: str = "00000000000000ff") -> tuple[int, object]:
    from farm.traces.capture import record

    return trace_id, record(trace_id=f"{trace_id:032x}", span_id=f"{n:016x}", parent_span_id=parent, name=f"s{n}", start_ns=0, end_ns=1,
                            status="ok", status_message=None, attributes={}, scrub=str)  # fmt: skip


def test_a_desk_holds_spans_that_come_before_their_watch_and_drops_them_when_none_comes(monkeypatch):
    """The ray engine's desk: a session's word that it watches a trace may come after the trace's
    first spans; those are held for it a while, and dropped (and counted) when it never comes."""
    import farm.traces.capture as capture

    now = [100.0]
    monkeypatch.setattr(capture.time, "monotonic", lambda: now[0])
    collector = Collector(hold=30.0)
    assert collector.add_all([span(1, 1), span(2, 2)]) == 2  # neither trace is watched yet: both held
    collector.watch(1)
    assert [each.name for each in collector.take(1, "00000000000000ff")] == ["s1"]
    now[0] += 31  # trace 2's watch never came
    assert collector.add_all([span(3, 3)]) == 1
    assert collector.expired == 1
    collector.watch(2)
    assert collector.take(2, "00000000000000ff") == []
    assert Collector().add_all([span(4, 4)]) == 0  # the local engine's: watched before any request, never held


def test_settle_waits_for_a_turn_s_spans_to_stop_arriving():
    import asyncio

    collector = Collector()
    collector.watch(7)

    async def late_batches() -> list:
        async def export() -> None:
            for n in range(3):
                await asyncio.sleep(0.05)
                collector.add(*span(7, n + 1))  # type: ignore[arg-type]

        sending = asyncio.ensure_future(export())
        taken = await collector.settle(7, "00000000000000ff", wait=5.0, quiet=0.3)
        await sending
        return taken

    assert [each.name for each in asyncio.run(late_batches())] == ["s1", "s2", "s3"]
    assert asyncio.run(collector.settle(7, "00000000000000ff", wait=0.2, quiet=0.05)) == []  # none came: it gives up at the wait
