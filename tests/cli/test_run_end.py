"""How a run that ended early is recorded and reported, the same in every output a CI reads (the
exit code, the ``--json`` summary event, JUnit, the HTML report, ``run.json``): a generator that
died partway, ``--max-cost``, ``--fail-fast``, an interrupt and a ``--resume``; and the budget
that could not count an agent's calls. Against an agent behind a real HTTP server on 127.0.0.1
that answers "hello" (one reply: 10 prompt and 5 completion tokens), on the local engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion

PER_CASE = (10 * 1000.0 + 5 * 2000.0) / 1e6  # $0.02 a reply at the priced connector's price

GENERATORS = """
def partial(meta):
    yield {"id": "ok", "input": "hello", "assertions": [{"type": "contains", "value": "hello"}]}
    raise RuntimeError("out of ideas")
"""


class Counted:
    """Answers "hello" (after ``delay`` seconds for a message that starts with "slow"), counting requests."""

    def __init__(self) -> None:
        self.requests = 0
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict, headers: dict[str, str]) -> Response:
        with self._lock:
            self.requests += 1
        slow = body["messages"][-1]["content"].startswith("slow")
        return Response(chat_completion("hello"), delay=0.3 if slow else 0.0)


@pytest.fixture(scope="module")
def agent():
    handler = Counted()
    with JSONServer(handler) as server:
        server.handler = handler
        yield server


@pytest.fixture
def project(tmp_path: Path, agent, monkeypatch) -> Path:
    (tmp_path / "farm.toml").write_text(
        f"""
[farm]
default_agent = "bot"
results_dir = "results"
engine = "local"

[connectors.priced]
base_url = "{agent.url}/v1"
model = "m"
price = {{ input = 1000.0, output = 2000.0 }}

[connectors.free]
base_url = "{agent.url}/v1"
model = "m"

[agents.bot]
kind = "openai"
connector = "priced"

[agents.unpriced]
kind = "openai"
connector = "free"
"""
    )
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gens.py").write_text(GENERATORS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def suite(project: Path, *messages: str, name: str = "suite.jsonl") -> str:
    """A suite of one case a message, passing when the reply says "hello" (a message "fail ..." wants "nope")."""
    cases = [
        {
            "id": f"c{i:02d}",
            "input": text,
            "assertions": [{"type": "contains", "value": "nope" if text.startswith("fail") else "hello"}],
        }
        for i, text in enumerate(messages)
    ]
    (project / name).write_text("".join(json.dumps(case) + "\n" for case in cases))
    return name


def summary_event(output: str) -> dict:
    events = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert events[-1]["event"] == "summary", output
    return events[-1]


def run_dirs(project: Path) -> list[Path]:
    return sorted((project / "results").iterdir(), key=lambda run: json.loads((run / "run.json").read_text())["started_at"])


def test_a_generator_that_dies_partway_stops_the_run_in_every_output(project: Path):
    result = CliRunner().invoke(
        app, ["test", "-i", "scripts:gens.partial?count=3", "--json", "--junit", "junit.xml", "--html", "report.html"]
    )
    assert result.exit_code == 1, result.output
    event = summary_event(result.output)
    assert event["exit_code"] == 1 and event["counts"]["total"] == 1
    gate = event["gate"]
    assert (gate["verdict"], gate["stopped"], gate["not_run"]) == ("failed", "generator_failed", 2)
    assert gate["sentence"].startswith("failed: the run stopped early, its generator failed: 2 case runs not run; ")
    (run_dir,) = run_dirs(project)
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["status"], info["stop_reason"], info["gate"]["verdict"]) == ("stopped", "generator_failed", "failed")
    junit = ET.parse(project / "junit.xml").getroot()
    assert (junit.get("tests"), junit.get("failures"), junit.get("errors")) == ("2", "0", "1")
    error = junit.find(".//testcase[@name='run stopped early']/error")
    assert error is not None and error.get("type") == "generator_failed"
    html = (project / "report.html").read_text()
    assert 'id="stopped"' in html and "The run stopped early, its generator failed: 2 case runs not run" in html

    quiet = CliRunner().invoke(app, ["test", "-i", "scripts:gens.partial?count=3", "-q"])
    assert quiet.exit_code == 1
    assert quiet.output.strip().splitlines()[-1].startswith("Gate: failed: the run stopped early, its generator failed")


def test_the_json_summary_of_a_resume_counts_the_whole_run_as_its_gate_does(project: Path):
    path = suite(project, "fail first", *(f"case {i}" for i in range(1, 12)))
    runner = CliRunner()
    stopped = runner.invoke(
        app, ["test", "-i", path, "--parallel", "1", "--max-cost", f"{3 * PER_CASE:.4f}", "--html", "stopped.html"]
    )
    assert stopped.exit_code == 1, stopped.output
    (run_dir,) = run_dirs(project)
    ran = len((run_dir / "results.jsonl").read_text().splitlines())
    assert ran < 12
    html = (project / "stopped.html").read_text()
    assert f"The run stopped early, its --max-cost budget spent: {12 - ran} case runs not run" in html
    assert 'data-reason="max_cost"' in html

    resumed = runner.invoke(app, ["test", "--resume", str(run_dir), "--max-cost", "10", "--json", "--html", "whole.html"])
    assert resumed.exit_code == 1, resumed.output
    event = summary_event(resumed.output)
    assert event["counts"]["total"] == 12 and event["counts"]["failed"] == 1 and event["counts"]["passed"] == 11
    assert event["exit_code"] == 1 and event["gate"]["below"] == 1 and event["gate"]["cases"] == 12
    assert sum(1 for line in resumed.output.splitlines() if '"case_result"' in line) == 12 - ran  # earlier ones not said again
    assert 'id="stopped"' not in (project / "whole.html").read_text()  # the whole run ran


def test_an_interrupted_runs_json_summary_says_the_exit_code_the_process_exits_with(project: Path):
    path = suite(project, *(f"slow {i}" for i in range(20)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "test", "-i", path, "--parallel", "1", "--json", "--html", "report.html"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and sum(len(p.read_text().splitlines()) for p in (project / "results").glob("*/results.jsonl")) < 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    event = summary_event(output)
    assert event["exit_code"] == 130 and event["gate"]["stopped"] == "interrupted"
    assert "The run was interrupted: " in (project / "report.html").read_text()


def test_a_fail_fast_stop_is_recorded_as_stopped_and_baseline_last_skips_it(project: Path):
    path = suite(project, "case 0", "fail 1", *(f"case {i}" for i in range(2, 6)))
    runner = CliRunner()
    full = runner.invoke(app, ["test", "-i", path, "-q"])
    assert full.exit_code == 1
    early = runner.invoke(app, ["test", "-i", path, "-x", "--parallel", "1", "-q"])
    assert early.exit_code == 1
    first, stopped = run_dirs(project)
    info = json.loads((stopped / "run.json").read_text())
    assert (info["status"], info["stop_reason"]) == ("stopped", "fail_fast")
    assert "stopped: --fail-fast: a case did not pass: 2 case runs finished, the rest were not started" in early.output

    last = runner.invoke(app, ["test", "-i", path, "--baseline", "last", "-q"])
    *_, third = run_dirs(project)
    gate = json.loads((third / "run.json").read_text())["gate"]
    assert gate["baseline"] == str(first) and gate["comparisons"][0]["cases"] == 6, last.output  # the finished run, whole
    assert first.name in " ".join(last.output.split())


def test_fail_fast_with_every_case_started_at_once_says_none_was_left_out(project: Path):
    path = suite(project, "fail 0", *(f"case {i}" for i in range(1, 12)))
    result = CliRunner().invoke(app, ["test", "-i", path, "-x", "-q"])  # the default --parallel starts all 12 at once
    assert result.exit_code == 1
    assert "the rest were not started" not in result.output
    assert "--fail-fast: a case did not pass once every case run had started: all 12 case runs finished" in result.output
    (run_dir,) = run_dirs(project)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"  # nothing was left out

    alone = suite(project, "fail 0", "case 1", name="two.jsonl")
    one = CliRunner().invoke(app, ["test", "-i", alone, "-x", "--parallel", "1", "-q"])
    assert "stopped: --fail-fast: a case did not pass: 1 case run finished, the rest were not started" in one.output


def test_a_budget_that_cannot_count_the_tested_agents_calls_is_refused_before_any_call(project: Path, agent):
    path = suite(project, "case 0", "case 1")
    before = agent.handler.requests
    result = CliRunner().invoke(app, ["test", "-i", path, "-n", "unpriced", "--max-cost", "0.000001"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert (
        f"--max-cost $1e-06: agent 'unpriced' calls connector 'free' in {project / 'farm.toml'}, which has no price, "
        "so the budget cannot count its calls" in said
    ), said
    assert "Traceback" not in result.output
    assert agent.handler.requests == before
    assert not (project / "results").exists() or not any((project / "results").iterdir())

    named = CliRunner().invoke(app, ["test", "-i", path, "-c", "free", "--max-cost", "0.000001"])
    assert named.exit_code == 2 and "-c free calls connector 'free'" in " ".join(named.output.split()), named.output
    assert agent.handler.requests == before


def test_a_baseline_folder_with_no_case_in_common_is_refused_before_any_call(project: Path, agent):
    other = suite(project, "case 0", "case 1", name="other.jsonl")
    runner = CliRunner()
    assert runner.invoke(app, ["test", "-i", other, "-q"]).exit_code == 0
    (baseline,) = run_dirs(project)
    path = suite(project, "case 0", "case 1")  # the same ids, in another suite
    before = agent.handler.requests
    result = runner.invoke(app, ["test", "-i", path, "--baseline", str(baseline)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert (
        f"--baseline {baseline}: baseline run {baseline.name} ran none of the cases of this run's suite suite.jsonl, "
        "so nothing could be compared; give a run of the same suite" in said
    ), said
    assert agent.handler.requests == before and run_dirs(project) == [baseline]

    same = runner.invoke(app, ["test", "-i", other, "--baseline", str(baseline), "-q"])
    assert same.exit_code == 0, same.output
