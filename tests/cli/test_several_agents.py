"""Several agents in one run (``-n A -n B``): every case on every agent, each row naming its
agent, on both engines, against agents behind a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion


def handler(path, body, headers):
    """``model-a`` answers every case; ``model-b`` refuses every third one (``case 0``, ``case 3``, ...)."""
    text = body["messages"][-1]["content"]
    number = int(text.split()[-1])
    if body["model"] == "model-b" and number % 3 == 0:
        return Response(chat_completion("I cannot help with that."))
    return Response(chat_completion(f"hello from {body['model']}"))


@pytest.fixture(scope="module")
def server():
    with JSONServer(handler) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path, server, engine: str) -> Path:
    (tmp_path / "farm.toml").write_text(
        f"""
[farm]
default_agent = "A"
results_dir = "results"
engine = "{engine}"

[connectors.a]
base_url = "{server.url}/v1"
model = "model-a"

[connectors.b]
base_url = "{server.url}/v1"
model = "model-b"

[agents.A]
kind = "openai"
connector = "a"

[agents.B]
kind = "openai"
connector = "b"
"""
    )
    cases = [{"id": f"c{i:02d}", "input": f"case {i}", "assertions": [{"type": "contains", "value": "hello"}]} for i in range(12)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return tmp_path


def test_every_case_runs_on_every_agent_and_each_row_names_its_agent(project: Path):
    result = farm.run(str(project / "suite.jsonl"), config=project / "farm.toml", agent=["A", "B"], runs=2, quiet=True)
    assert result.exit_code == 1  # B fails some cases
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    keys = Counter((r["id"], r["run_index"], r["agent"]) for r in rows)
    assert len(keys) == 12 * 2 * 2 and set(keys.values()) == {1}
    failed = sorted({r["id"] for r in rows if r["status"] == "failed"})
    assert failed == ["c00", "c03", "c06", "c09"]
    assert {r["agent"] for r in rows if r["status"] == "failed"} == {"B"}
    assert {r["turns"][0]["output"] for r in rows if r["agent"] == "A"} == {"hello from model-a"}
    cases = pq.read_table(result.run_dir / "cases.parquet").to_pylist()
    assert Counter((r["case_id"], r["run_index"], r["agent"]) for r in cases) == keys
    turns = pq.read_table(result.run_dir / "turns.parquet").to_pylist()
    assert Counter(r["agent"] for r in turns) == {"A": 24, "B": 24}
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["agents"] == ["A", "B"] and info["counts"]["total"] == 48 and info["counts"]["failed"] == 8
    assert info["agent_counts"]["A"]["failed"] == 0 and info["agent_counts"]["B"]["failed"] == 8
    assert result.summary.total == 48


def test_the_cli_takes_n_more_than_once_and_resume_keeps_the_agents(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    runner = CliRunner()
    done = runner.invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "B", "--run", "c0[0-2]"])
    assert done.exit_code == 1, done.output
    (run_dir,) = (project / "results").iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["agent"]) for r in rows) == [(f"c0{i}", a) for i in range(3) for a in "AB"]
    # a resume of a finished run runs nothing again, on both agents
    again = runner.invoke(app, ["test", "--resume", str(run_dir)])
    assert again.exit_code == 1, again.output
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 6


def test_an_agent_named_twice_or_unknown_is_one_sentence(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    runner = CliRunner()
    twice = runner.invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "A"])
    assert twice.exit_code == 2 and "names an agent twice" in twice.output
    unknown = runner.invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "Z"])
    assert unknown.exit_code == 2 and "'Z'" in unknown.output and "Traceback" not in unknown.output


@pytest.mark.parametrize("engine", ["local"])  # a rescore replays on the local engine whatever ran the run
def test_a_rescore_of_a_run_of_several_agents_judges_each_agents_own_conversation(project: Path):
    result = farm.run(str(project / "suite.jsonl"), config=project / "farm.toml", agent=["A", "B"], quiet=True)
    edited = project / "edited.jsonl"
    cases = [{"id": f"c{i:02d}", "input": f"case {i}", "assertions": [{"type": "contains", "value": "model-a"}]} for i in range(12)]
    edited.write_text("".join(json.dumps(c) + "\n" for c in cases))
    again = farm.rescore(result.run_dir, input=str(edited), quiet=True)
    rows = [json.loads(line) for line in (again.run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 24 and all(r["rescorable"] for r in rows)
    assert {(r["agent"], r["status"]) for r in rows} == {("A", "passed"), ("B", "failed")}  # B's replies name model-b
