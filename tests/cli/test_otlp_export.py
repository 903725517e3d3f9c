"""Every case run out as a trace (``--otlp``), end to end on both engines: a real OTLP/HTTP
collector on 127.0.0.1 (decoding with the official ``opentelemetry-proto``) gets one root span per
case run, a turn span per turn on the GenAI conventions, the in-process agent's spans beneath their
turn, and one ``gen_ai.evaluation.result`` per verdict, as a log record and as a span event. A
remote agent's ``traceparent`` names the exported turn. A collector that is not there costs one
warning line and no case's status."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion

AGENT = '''
from opentelemetry import trace

tracer = trace.get_tracer("travel-agent")


def travel(messages, options):
    text = messages[-1]["content"]
    with tracer.start_as_current_span("execute_tool search") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("case.input", text)
    return f"done: {text}"


def simulate(messages, options):
    import json
    return json.dumps({"input": "and then?", "goal_achieved": len(messages) > 2})


def judge(messages, options):
    import json
    return json.dumps({"passed": False, "score": 0.25, "reason": "not polite"})
'''

TOML = """
[farm]
default_agent = "travel"
results_dir = "results"
engine = "{engine}"

[agents.travel]
kind = "python"
entry = "{module}:travel"

[agents.sim]
kind = "python"
entry = "{module}:simulate"

[agents.judge]
kind = "python"
entry = "{module}:judge"

[agents.grader]
kind = "validator"
uses = "judge"
"""


class Collector:
    """An OTLP/HTTP collector: ``/v1/traces`` and ``/v1/logs``, protobuf, decoded with opentelemetry-proto."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.logs: list[Any] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

                body = self.rfile.read(int(self.headers["Content-Length"]))
                with collector.lock:
                    if self.path == "/v1/traces":
                        request = ExportTraceServiceRequest.FromString(body)
                        collector.spans += [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
                    else:
                        request = ExportLogsServiceRequest.FromString(body)
                        collector.logs += [log for rl in request.resource_logs for sl in rl.scope_logs for log in sl.log_records]
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector():
    found = Collector()
    yield found
    found.close()


def attributes(item: Any) -> dict[str, Any]:
    def value(v: Any) -> Any:
        kind = v.WhichOneof("value")
        return [value(each) for each in v.array_value.values] if kind == "array_value" else getattr(v, kind)

    return {kv.key: value(kv.value) for kv in item.attributes}


def invoke(*args: str):
    return CliRunner().invoke(app, ["test", *args], catch_exceptions=False)


def results(folder: Path) -> dict[str, dict]:
    (run_dir,) = (folder / "results").iterdir()
    return {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


def test_each_case_run_is_one_trace_with_its_turns_the_agent_s_spans_and_its_verdicts(python_project, tmp_path: Path, monkeypatch, engine: str, collector: Collector):
    python_project(AGENT, TOML.replace("{engine}", engine), {})
    monkeypatch.chdir(tmp_path)
    cases = [
        {"id": "one", "turns": [{"input": "to Oslo", "assertions": [{"type": "contains", "value": "Oslo"}]},
                                {"input": "to Rome", "assertions": [{"type": "contains", "value": "Paris"}, {"type": "tool_executed", "name": "search"}]}]},
        {"id": "two", "input": "to Lima", "assertions": [{"type": "contains", "value": "Lima"}]},
    ]  # fmt: skip
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    result = invoke("-i", "suite.jsonl", "--otlp", collector.url, "--runs", "2")
    assert result.exit_code == 1, result.output  # "one" fails its second turn
    assert f"Export: {collector.url}" in result.output
    by_id = results(tmp_path)
    roots = [span for span in collector.spans if not span.parent_span_id]
    assert sorted(attributes(span)["test.case.name"] for span in roots) == ["one", "one", "two", "two"]  # one per case run
    one = next(span for span in roots if attributes(span)["test.case.name"] == "one")
    assert attributes(one)["test.case.result.status"] == "fail"
    assert attributes(one)["test.suite.name"] == "suite.jsonl"
    trace = [span for span in collector.spans if span.trace_id == one.trace_id]
    turns = sorted((span for span in trace if span.name == "invoke_agent travel"), key=lambda span: attributes(span)["farm.turn.number"])
    assert [attributes(span)["gen_ai.operation.name"] for span in turns] == ["invoke_agent", "invoke_agent"]
    assert all(span.parent_span_id == one.span_id for span in turns)
    tools = [span for span in trace if span.name == "execute_tool search"]
    assert sorted(attributes(span)["case.input"] for span in tools) == ["to Oslo", "to Rome"]
    assert {span.parent_span_id for span in tools} == {span.span_id for span in turns}  # each beneath its turn
    assert "gen_ai.input.messages" not in attributes(turns[0])  # content only with --otlp-content
    # one evaluation per verdict, as a log record in its turn's context and as a span event
    logs = [log for log in collector.logs if log.trace_id == one.trace_id]
    assert sorted((attributes(log)["gen_ai.evaluation.name"], attributes(log)["gen_ai.evaluation.score.label"]) for log in logs) == [
        ("contains", "failed"), ("contains", "passed"), ("tool_executed", "passed")]  # fmt: skip
    assert all(log.event_name == "gen_ai.evaluation.result" for log in logs)
    assert {log.span_id for log in logs} == {span.span_id for span in turns}
    assert sum(len([e for e in span.events if e.name == "gen_ai.evaluation.result"]) for span in turns) == 3
    recorded = [r for r in map(json.loads, next((tmp_path / "results").iterdir()).joinpath("results.jsonl").read_text().splitlines()) if r["id"] == "one"]
    assert {r["trace_id"] for r in recorded} == {span.trace_id.hex() for span in roots if attributes(span)["test.case.name"] == "one"}
    assert by_id["two"]["status"] == "passed"


def test_a_remote_agent_s_traceparent_names_the_exported_turn_and_content_goes_with_otlp_content(tmp_path: Path, monkeypatch, collector: Collector):
    seen: list[str | None] = []
    secret = "sk-otlp-0123456789abcdef0123"
    monkeypatch.setenv("REMOTE_KEY", secret)

    def agent(path: str, body: dict, headers: dict[str, str]) -> Response:
        lowered = {key.lower(): value for key, value in headers.items()}
        seen.append(lowered.get("traceparent"))
        return Response(chat_completion(f"done: {body['messages'][-1]['content']} ({lowered['authorization']})"))  # a leaky agent

    with JSONServer(agent) as server:
        (tmp_path / "farm.toml").write_text(
            f'[farm]\ndefault_agent = "remote"\nresults_dir = "results"\nengine = "local"\n\n'
            f'[connectors.remote]\nbase_url = "{server.url}/v1"\nmodel = "gpt-test"\napi_key_env = "REMOTE_KEY"\n\n[agents.remote]\nconnector = "remote"\n'
        )
        monkeypatch.chdir(tmp_path)
        result = invoke("-i", "hello there", "--otlp", f"{collector.url}/v1/traces", "--otlp-content")
    assert result.exit_code == 0, result.output
    (turn,) = [span for span in collector.spans if span.name == "invoke_agent remote"]
    assert seen == [f"00-{turn.trace_id.hex()}-{turn.span_id.hex()}-01"]
    found = attributes(turn)
    assert found["gen_ai.request.model"] == "gpt-test"
    assert json.loads(found["gen_ai.output.messages"])[0]["parts"][0]["content"].startswith("done: hello there (Bearer ")
    sent = [str(span) for span in collector.spans] + [str(log) for log in collector.logs]
    assert not any(secret[4:16] in each for each in sent)  # masked before it was cut: not even a piece


def test_a_collector_that_is_not_there_costs_one_warning_and_no_status(python_project, tmp_path: Path, monkeypatch):
    python_project(AGENT, TOML.replace("{engine}", "local"), {})
    monkeypatch.chdir(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps({"id": f"c{i}", "input": f"to {i}", "assertions": [{"type": "contains", "value": "done"}]}) + "\n" for i in range(5)))
    result = invoke("-i", "suite.jsonl", "--otlp", f"http://127.0.0.1:{port}")
    assert result.exit_code == 0, result.output
    assert {r["status"] for r in results(tmp_path).values()} == {"passed"}
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: --otlp")]
    assert warnings == [f"warning: --otlp http://127.0.0.1:{port}: 5 of 5 case runs were not delivered (connection refused)"]
    assert "Traceback" not in result.output and "Transient error" not in result.output


def test_a_value_that_is_no_url_is_refused_before_the_run(python_project, tmp_path: Path, monkeypatch):
    python_project(AGENT, TOML.replace("{engine}", "local"), {})
    monkeypatch.chdir(tmp_path)
    result = invoke("-i", "hello", "--otlp", "localhost:4318")
    assert result.exit_code == 2
    assert "--otlp: 'localhost:4318' is not an http(s) URL of an OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318)" in result.output
    assert not (tmp_path / "results").exists()


def test_the_simulator_s_and_the_judges_calls_are_chat_spans_and_a_judge_s_score_is_the_evaluation_s(python_project, tmp_path: Path, monkeypatch, collector: Collector):
    python_project(AGENT, TOML.replace("{engine}", "local").replace('results_dir = "results"', 'results_dir = "results"\nsimulator = "sim"\nvalidator = "grader"'), {})
    monkeypatch.chdir(tmp_path)
    cases = [
        {"id": "judged", "input": "hi", "assertions": [{"type": "agent", "value": "polite"}]},
        {"id": "dyn", "max_turns": 3, "checkpoints": [{"id": "answered", "assertion": {"type": "contains", "value": "done"}}]},
    ]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    result = invoke("-i", "suite.jsonl", "--otlp", collector.url)
    assert result.exit_code == 1, result.output  # the judge fails "judged"
    roots = {attributes(span)["test.case.name"]: span for span in collector.spans if not span.parent_span_id}
    chats = {name: [attributes(span)["farm.role"] for span in collector.spans if span.trace_id == root.trace_id and span.name == "chat"] for name, root in roots.items()}
    assert chats["judged"] == ["validator"]
    assert chats["dyn"] and set(chats["dyn"]) == {"simulator"}
    judged = [attributes(log) for log in collector.logs if log.trace_id == roots["judged"].trace_id]
    assert judged == [{"gen_ai.evaluation.name": "agent", "gen_ai.evaluation.score.value": 0.25, "gen_ai.evaluation.score.label": "failed",
                       "gen_ai.evaluation.explanation": "the validator judged it failed: not polite"}]  # fmt: skip
    checkpoint = [attributes(log) for log in collector.logs if log.trace_id == roots["dyn"].trace_id]
    assert [(each["gen_ai.evaluation.name"], each["gen_ai.evaluation.score.label"]) for each in checkpoint] == [("checkpoint answered", "passed")]


def test_a_slow_collector_never_holds_the_run_up_what_does_not_fit_is_counted_and_said_once():
    """The writer only queues: with a collector that does not answer, 60 results of 20 kB are
    written at once, the queue of 5 (and the pipe to the export process) keeps what fits, and the
    end of the run waits no longer than it said."""
    import io
    import time

    from farm.results import CaseResult, Status, TurnResult
    from farm.traces.export import OTLPExport

    release = threading.Event()

    class Stuck(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            release.wait(10)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stuck)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    warned = io.StringIO()
    export = OTLPExport(f"http://127.0.0.1:{server.server_address[1]}", "run-1", warn=warned, queue_cases=5, close_wait=3.0)
    try:
        started = time.monotonic()
        for n in range(60):
            export.write(CaseResult(id=f"c{n}", status=Status.PASSED, started_at=time.time(), turns=[TurnResult(turn=1, output="x" * 20_000)]))
        assert time.monotonic() - started < 1.0  # never blocked on the collector
        export.close()
        assert time.monotonic() - started < 6.0  # the run's end waited its 3 s, not the collector
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    (line,) = warned.getvalue().splitlines()
    assert export.overflow >= 30 and export.dropped == 60 and export.sent == 0
    assert line == f"warning: --otlp {export.endpoint}: 60 of 60 case runs were not delivered ({export.overflow} found the queue full; not sent within 3 s of the run's end)"


def test_more_spans_than_one_batch_all_arrive(collector: Collector):
    """Batches of 512 spans: 400 case runs of two turns (1200 spans, 800 evaluation records) all reach the collector."""
    import time

    from farm.results import AssertionResult, CaseResult, Status, TurnResult
    from farm.traces.export import OTLPExport

    export = OTLPExport(collector.url, "run-1", close_wait=120)  # a bound on a loaded machine
    for n in range(400):
        turns = [TurnResult(turn=t, output="ok", started_at=time.time(), assertions=[AssertionResult(type="contains", passed=True)]) for t in (1, 2)]
        export.write(CaseResult(id=f"c{n}", status=Status.PASSED, started_at=time.time(), turns=turns, source="s.jsonl:1"))
    export.close()
    assert (export.sent, export.dropped) == (400, 0)
    assert (len(collector.spans), len(collector.logs)) == (1200, 800)
    assert len({span.trace_id for span in collector.spans}) == 400
