"""An agent whose endpoint nothing listens on stops the run in seconds with one sentence naming the
connector and its URL, instead of every case spending its retries (exit 2 when no case got an
answer, 1 when some did); on both engines, beside the demo agent behind a real HTTP server."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

SENTENCE = "error: connector 'dead' at http://127.0.0.1:{port}/v1 cannot be reached: "


def free_port() -> int:
    """A port where nothing listens (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def project(tmp_path: Path, demo_server, engine: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    port = free_port()
    (tmp_path / "farm.toml").write_text(
        f"""
[farm]
default_agent = "down"
results_dir = "results"
engine = "{engine}"

[connectors.dead]
base_url = "http://127.0.0.1:{port}/v1"
model = "m"

[connectors.demo]
base_url = "{demo_server.url}/v1"
model = "demo-expense"
max_retries = 0

[agents.down]
kind = "openai"
connector = "dead"

[agents.up]
kind = "openai"
connector = "demo"
"""
    )
    cases = [{"id": f"c{i:02d}", "input": "Hello"} for i in range(40)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    monkeypatch.chdir(tmp_path)
    return tmp_path, port


def test_a_dead_endpoint_stops_the_run_at_once_with_one_sentence(project: tuple[Path, int]):
    folder, port = project
    started = time.monotonic()
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--parallel", "4"])
    took = time.monotonic() - started
    assert result.exit_code == 2, result.output  # no case got an answer: nothing was tested
    said = [line for line in result.output.splitlines() if "cannot be reached" in line]
    assert len(said) == 1 and said[0].startswith(SENTENCE.format(port=port)), result.output
    assert "ERROR" not in result.output  # not one line per case
    assert "Total" not in result.output and "Gate:" not in result.output  # nor totals of a run that never began
    assert took < 20, f"{took:.1f} s: the cases spent their retries"  # each case alone: 6 requests over ~10 s
    (run_dir,) = (folder / "results").iterdir()
    info = json.loads((run_dir / "run.json").read_text())
    assert (info["status"], info["stop_reason"]) == ("stopped", "unreachable")
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) < 40 and {r["status"] for r in rows} == {"error"}  # dispatch stopped
    assert (info["gate"]["verdict"], info["gate"]["stopped"], info["gate"]["not_run"]) == ("failed", "unreachable", 40 - len(rows))
    report = " ".join(CliRunner().invoke(app, ["report", str(run_dir)]).output.split())
    assert f"run {info['run_id']} is stopped: {40 - len(rows)} of 40 planned case runs did not run" in report


def test_a_dead_endpoint_beside_one_that_answers_stops_the_run_with_exit_1(project: tuple[Path, int]):
    _, port = project
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "-n", "up", "-n", "down", "--parallel", "4", "-q"])
    assert result.exit_code == 1, result.output  # some cases got an answer: a failed run, not a usage error
    assert result.output.count("cannot be reached") == 1 and SENTENCE.format(port=port) in result.output


def test_a_suite_smaller_than_the_burst_gets_the_same_verdict(project: tuple[Path, int]):
    folder, port = project
    toml = folder / "farm.toml"
    toml.write_text(toml.read_text().replace('model = "m"', 'model = "m"\nmax_retries = 0'))  # 5 failed connections in all
    (folder / "small.jsonl").write_text("".join(json.dumps({"id": f"s{i}", "input": "Hello"}) + "\n" for i in range(5)))
    result = CliRunner().invoke(app, ["test", "-i", "small.jsonl", "-q"])
    assert result.exit_code == 2, result.output
    said = [line for line in result.output.splitlines() if "cannot be reached" in line]
    assert len(said) == 1 and said[0].startswith(SENTENCE.format(port=port)), result.output
    (run_dir,) = (folder / "results").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["stop_reason"] == "unreachable"
