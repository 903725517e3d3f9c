"""Trace assertions on in-process agents, end to end on both engines: a python agent made of
OpenTelemetry spans (sync ones in the farm's threads, async ones in its tasks), many cases at
once, the spans kept in the results and ``spans.parquet``, an uninstrumented agent an error,
and a rescore that judges the recorded spans again without calling the agent."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.results import read_run

AGENT = '''
import asyncio, json, time
from pathlib import Path
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

tracer = trace.get_tracer("travel-agent")
CALLS = Path(__file__).with_name("calls.txt")


def _tool(name, text, **arguments):
    with tracer.start_as_current_span(f"execute_tool {name}") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        if name != "unnamed":
            span.set_attribute("gen_ai.tool.name", name)
        span.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
        span.set_attribute("case.input", text)
        if name == "fail":
            span.set_status(Status(StatusCode.ERROR, "the booking system is down"))


def _plan(text):
    with open(CALLS, "a") as out:
        out.write(text + "\\n")
    with tracer.start_as_current_span("chat plan") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("case.input", text)
    tools = ["search"] + (["book"] if "book" in text else []) + (["fail"] if "fail" in text else [])
    return tools


def travel(messages, options):
    text = messages[-1]["content"]
    for tool in _plan(text):
        time.sleep(0.002)  # other cases' threads run meanwhile
        _tool(tool, text, city=text.split()[-1])
    return f"done: {text}"


async def travel_async(messages, options):
    text = messages[-1]["content"]
    for tool in _plan(text):
        await asyncio.sleep(0.002)  # other cases' tasks run meanwhile
        _tool(tool, text, city=text.split()[-1])
    return f"done: {text}"


def silent(messages, options):
    with open(CALLS, "a") as out:
        out.write("silent\\n")
    return "I make no spans"
'''

TOML = """
[farm]
default_agent = "travel"
results_dir = "results"
engine = "{engine}"

[agents.travel]
kind = "python"
entry = "{module}:travel"

[agents.travel_async]
kind = "python"
entry = "{module}:travel_async"

[agents.silent]
kind = "python"
entry = "{module}:silent"
"""


@pytest.fixture
def project(tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    module = f"travel_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(AGENT)
    (tmp_path / "farm.toml").write_text(TOML.format(engine=engine, module=module))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def suite(path: Path, cases: list[dict]) -> str:
    path.write_text("".join(json.dumps(case) + "\n" for case in cases))
    return path.name


def farm(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def only_run(project: Path) -> Path:
    (run_dir,) = (project / "results").iterdir()
    return run_dir


def results(run_dir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}


ASSERTIONS = [
    ("tool_executed", {"name": "book"}, ["book paris"], ["look lyon"]),
    ("tool_executed", {"name": "search", "arguments": {"city": "paris"}, "count": 1}, ["look paris"], ["look lyon"]),
    ("tool_executed", {"name": "search", "max": 0}, [], ["look lyon"]),
    ("trajectory", {"tools": ["search", "book"]}, ["book paris"], ["look paris"]),
    ("trajectory", {"tools": ["book", "search"], "order": "any"}, ["book paris"], ["look paris"]),
    ("trajectory", {"tools": ["search"], "order": "exact"}, ["look paris"], ["book paris"]),
    ("span_count", {"operation": "chat", "max": 1}, ["look paris"], []),
    ("span_count", {"name": "execute_tool *", "min": 2}, ["book paris"], ["look paris"]),
    ("span_latency", {"operation": "execute_tool", "max_ms": 60000}, ["look paris"], []),
    ("span_latency", {"operation": "rerank", "max_ms": 1}, [], ["look paris"]),
    ("no_error_spans", {}, ["book paris"], ["fail paris"]),
]


@pytest.mark.parametrize("agent", ["travel", "travel_async"])
def test_each_trace_assertion_passes_and_fails_as_it_should_with_no_span_on_the_wrong_case(project: Path, engine: str, agent: str):
    cases = []
    for n, (kind, params, passing, failing) in enumerate(ASSERTIONS):
        for verdict, inputs in (("pass", passing), ("fail", failing)):
            for i, text in enumerate(inputs):
                cases += [{"id": f"{kind}-{n}-{verdict}-{i}-{copy}", "input": text, "assertions": [{"type": kind, **params}]} for copy in range(3)]
    result = farm("test", "-q", "-n", agent, "--parallel", "50", "-i", suite(project / "traces.jsonl", cases))
    assert result.exit_code == 1, result.output
    run_dir = only_run(project)
    by_id = results(run_dir)
    assert len(by_id) == len(cases) > 50
    for case_id, record in by_id.items():
        assert record["status"] == ("passed" if "-pass-" in case_id else "failed"), (case_id, record["error"])
        spans = record["turns"][0]["spans"]
        assert spans and {span["attributes"]["case.input"] for span in spans} == {record["turns"][0]["input"]}  # its own spans, all of them
        assert len({span["trace_id"] for span in spans}) == 1
    traces = [record["turns"][0]["spans"][0]["trace_id"] for record in by_id.values()]
    assert len(set(traces)) == len(traces)  # a trace per case run
    failed = by_id["tool_executed-0-fail-0-0"]
    assert failed["error"] == "turn 1: expected a call of tool 'book', found 0; this turn called: search"
    table = read_run(run_dir).spans(columns=["case_id", "operation", "tool_name"])
    assert table.num_rows == sum(len(record["turns"][0]["spans"]) for record in by_id.values())
    assert {"chat", "execute_tool"} == set(table.column("operation").to_pylist())


def test_an_agent_that_emits_no_span_is_an_error_and_the_run_fails(project: Path):
    cases = [
        {"id": "quiet", "input": "book paris", "assertions": [{"type": "tool_executed", "name": "book", "negate": True}]},
        {
            "id": "mute",
            "input": "book paris",
            "assertions": [{"type": "contains", "value": "spans"}, {"type": "tool_executed", "name": "book"}],
        },
    ]
    result = farm("test", "-n", "silent", "-i", suite(project / "quiet.jsonl", cases))
    assert result.exit_code == 1, result.output
    run_dir = only_run(project)
    by_id = results(run_dir)
    said = "the agent emitted no OpenTelemetry spans: is it instrumented? (docs/traces.md)"
    for record in by_id.values():
        assert (record["status"], record["error"]) == ("error", said)
    assert not (run_dir / "spans.parquet").exists()
    # each trace assertion is recorded as not judged (an error), never as the agent's failure or pass
    rows = read_run(run_dir).assertions(columns=["case_id", "type", "passed", "error", "message"]).to_pylist()
    assert sorted((r["case_id"], r["type"], r["passed"], r["error"]) for r in rows) == [
        ("mute", "contains", True, False),
        ("mute", "tool_executed", False, True),
        ("quiet", "tool_executed", False, True),
    ]
    assert {r["message"] for r in rows if r["error"]} == {said}
    assert "found 0" not in result.output and "! tool_executed" in result.output, result.output
    report = farm("report", str(run_dir))
    assert "Assertions that failed most" not in report.output, report.output


def test_a_rescore_with_a_changed_trace_assertion_flips_the_verdict_without_calling_the_agent(project: Path, engine: str):
    cases = [{"id": "trip", "input": "look paris", "assertions": [{"type": "tool_executed", "name": "book"}]}]
    assert farm("test", "-q", "-i", suite(project / "trip.jsonl", cases)).exit_code == 1
    run_dir = only_run(project)
    calls = (project / "calls.txt").read_text()
    edited = [{"id": "trip", "input": "look paris", "assertions": [{"type": "tool_executed", "name": "search", "arguments": {"city": "paris"}}]}]
    rescored = farm("rescore", "-q", str(run_dir), "-i", suite(project / "edited.jsonl", edited))
    assert rescored.exit_code == 0, rescored.output
    assert "1 passed" in rescored.output
    assert (project / "calls.txt").read_text() == calls  # the agent was not called


def test_farm_traces_keeps_every_case_run_s_spans_without_a_trace_assertion(project: Path):
    (project / "farm.toml").write_text((project / "farm.toml").read_text().replace('results_dir = "results"', 'results_dir = "results"\ntraces = true\nmax_spans = 2'))
    cases = [{"id": "plain", "input": "book paris", "assertions": [{"type": "contains", "value": "done"}]}]
    assert farm("test", "-q", "-i", suite(project / "plain.jsonl", cases)).exit_code == 0
    record = results(only_run(project))["plain"]
    assert len(record["turns"][0]["spans"]) == 2 and record["spans_dropped"] == 1  # chat, search, book: 2 kept


def test_farm_validate_checks_a_trace_assertion_s_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    cases = [
        {"id": "typo", "input": "x", "assertions": [{"type": "tool_executed", "nmae": "book"}]},
        {"id": "both", "input": "x", "assertions": [{"type": "span_count", "operation": "chat", "name": "x*"}]},
        {"id": "order", "input": "x", "assertions": [{"type": "trajectory", "tools": ["a"], "order": "sorted"}]},
    ]
    result = farm("validate", suite(tmp_path / "bad.jsonl", cases))
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert "error: bad.jsonl:1: field 'assertions[0].nmae': unknown field (did you mean 'name'?)" in lines
    assert any(line.startswith("error: bad.jsonl:2: field 'assertions[0]': give one of 'operation' and 'name'") for line in lines)
    assert "error: bad.jsonl:3: field 'assertions[0].order': 'sorted' is not one of exact, in_order, any" in lines


def test_final_assertions_see_the_whole_case_run_and_a_turn_its_own(project: Path):
    trip = {
        "turns": [
            {"input": "look paris", "assertions": [{"type": "trajectory", "tools": ["search"], "order": "exact"}]},
            {"input": "book paris", "assertions": [{"type": "tool_executed", "name": "search", "count": 1}]},
        ],
        "final_assertions": [{"type": "trajectory", "tools": ["search", "search", "book"], "order": "exact"}, {"type": "span_count", "operation": "chat", "min": 2, "max": 2}],
    }
    wrong = {"id": "wrong", **trip, "final_assertions": [{"type": "tool_executed", "name": "search", "count": 1}]}
    result = farm("test", "-q", "-i", suite(project / "trip.jsonl", [{"id": "trip", **trip}, wrong]))
    by_id = results(only_run(project))
    assert by_id["trip"]["status"] == "passed", by_id["trip"]["error"]
    assert by_id["wrong"]["error"] == "final assertions: expected 1 call(s) of tool 'search', found 2; the case run called: search, search, book"
    assert result.exit_code == 1


LEAKY = '''
import os
from opentelemetry import trace

def leaky(messages, options):
    with trace.get_tracer("leaky").start_as_current_span("execute_tool search") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
        span.set_attribute("http.request.header.authorization", "Bearer " + os.environ["FARM_TRACE_TEST_KEY"])
        span.set_attribute("gen_ai.tool.call.result", "x" * 5000 + os.environ["FARM_TRACE_TEST_KEY"])  # past the cut
    return "done"
'''


def test_a_span_s_attributes_are_masked_of_secrets_before_they_are_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    key = "sk-trace-" + "7" * 32
    monkeypatch.setenv("FARM_TRACE_TEST_KEY", key)
    module = f"leaky_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(LEAKY)
    (tmp_path / "farm.toml").write_text(
        f'[farm]\ndefault_agent = "leaky"\nresults_dir = "results"\nengine = "local"\n\n'
        f'[connectors.paid]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "FARM_TRACE_TEST_KEY"\n\n'
        f'[agents.leaky]\nkind = "python"\nentry = "{module}:leaky"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    cases = [{"id": "leak", "input": "hi", "assertions": [{"type": "tool_executed", "name": "search"}]}]
    assert farm("test", "-q", "-i", suite(tmp_path / "leak.jsonl", cases)).exit_code == 0
    run_dir = only_run(tmp_path)
    for name in ("results.jsonl", "spans.parquet", "turns.parquet"):
        assert key[:12] not in (run_dir / name).read_bytes().decode("latin-1")  # not even a piece
    (span,) = results(run_dir)["leak"]["turns"][0]["spans"]
    assert span["attributes"]["http.request.header.authorization"] == "Bearer ***"
    assert len(span["attributes"]["gen_ai.tool.call.result"]) == 2001  # cut at 2000, after the mask
