"""``--max-cost``: a run stops dispatching once its spend reaches the budget, says so, and a
resume with a larger budget finishes it, each case once; on both engines, against an agent
behind a real HTTP server on 127.0.0.1 that reports 10 prompt and 5 completion tokens a reply."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion

PRICE = {"input": 1000.0, "output": 2000.0}  # USD per million tokens: 0.01 + 0.01 = $0.02 a reply
PER_CASE = (10 * PRICE["input"] + 5 * PRICE["output"]) / 1e6


@pytest.fixture(scope="module")
def server():
    with JSONServer(lambda path, body, headers: Response(chat_completion("hello"), delay=0.02)) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path, server, engine: str, monkeypatch) -> Path:
    (tmp_path / "farm.toml").write_text(
        f"""
[farm]
default_agent = "bot"
results_dir = "results"
engine = "{engine}"

[connectors.priced]
base_url = "{server.url}/v1"
model = "m"
price = {{ input = {PRICE["input"]}, output = {PRICE["output"]} }}

[agents.bot]
kind = "openai"
connector = "priced"
"""
    )
    cases = [{"id": f"c{i:02d}", "input": f"case {i}", "assertions": [{"type": "contains", "value": "hello"}]} for i in range(40)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_the_budget_stops_the_run_and_a_larger_one_finishes_it_each_case_once(project: Path):
    runner = CliRunner()
    stopped = runner.invoke(app, ["test", "-i", "suite.jsonl", "--parallel", "2", "--max-cost", f"{10 * PER_CASE:.4f}"])
    assert stopped.exit_code == 1, stopped.output
    (run_dir,) = (project / "results").iterdir()
    assert "spent its budget" in stopped.output and f"farm test --resume {run_dir}" in stopped.output
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "stopped" and info["stop_reason"] == "max_cost"
    first = rows(run_dir)
    assert 10 <= len(first) <= 12  # the tenth case spends the budget; what was in flight (one more) finishes
    assert all(r["cost_usd"] == pytest.approx(PER_CASE) for r in first)  # tokens x price

    again = runner.invoke(app, ["test", "--resume", str(run_dir), "--max-cost", "10"])
    assert again.exit_code == 0, again.output
    every = rows(run_dir)
    assert sorted(r["id"] for r in every) == [f"c{i:02d}" for i in range(40)]
    table = pq.read_table(run_dir / "cases.parquet").to_pylist()
    assert sorted(r["case_id"] for r in table) == [f"c{i:02d}" for i in range(40)]
    assert sum(r["cost_usd"] for r in table) == pytest.approx(40 * PER_CASE)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["stop_reason"] is None
    assert info["cost"]["cost_usd"] == pytest.approx(40 * PER_CASE)  # every part of the run


def test_a_resume_that_keeps_a_spent_budget_starts_nothing_and_says_so(project: Path):
    runner = CliRunner()
    runner.invoke(app, ["test", "-i", "suite.jsonl", "--parallel", "1", "--max-cost", f"{3 * PER_CASE:.4f}"])
    (run_dir,) = (project / "results").iterdir()
    before = len(rows(run_dir))
    again = runner.invoke(app, ["test", "--resume", str(run_dir)])  # the run's own budget, already spent
    assert again.exit_code == 1 and "spent its budget" in again.output
    assert len(rows(run_dir)) == before


def test_quiet_says_why_the_run_stopped_in_a_line_like_pytests(project: Path):
    stopped = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--parallel", "1", "--max-cost", f"{3 * PER_CASE:.4f}", "-q"])
    assert stopped.exit_code == 1, stopped.output
    lines = stopped.output.strip().splitlines()
    assert lines[0].startswith("stopped: the run spent its budget of $") and "the rest were not started" in lines[0]
    assert re.fullmatch(r"\d+ passed in \d[\d.]*m?s", lines[-2]), lines
    assert re.fullmatch(r"Gate: failed: the run stopped early, its --max-cost budget spent: 3\d case runs not run; .*", lines[-1]), lines
    assert "Total:" not in stopped.output and "Summary" not in stopped.output


def test_a_run_its_budget_stopped_fails_its_gate_wherever_it_is_said(project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project / "gh.md"))
    runner = CliRunner()
    stopped = runner.invoke(app, ["test", "-i", "suite.jsonl", "--parallel", "1", "--max-cost", f"{3 * PER_CASE:.4f}", "--junit", "junit.xml"])
    assert stopped.exit_code == 1, stopped.output
    (run_dir,) = (project / "results").iterdir()
    ran = len(rows(run_dir))
    junit = ET.parse(project / "junit.xml").getroot()
    assert (junit.get("tests"), junit.get("errors")) == (str(ran + 1), "1")  # the stop is an error, not a green suite
    error = junit.find(".//testcase[@name='run stopped early']/error")
    assert error is not None and error.get("type") == "max_cost" and f"{40 - ran} case runs not run" in error.get("message", "")
    said = f"Gate: failed: the run stopped early, its --max-cost budget spent: {40 - ran} case runs not run; all {ran} cases passed their gate"
    assert stopped.output.strip().splitlines()[-1].startswith(said), stopped.output
    gate = json.loads((run_dir / "run.json").read_text())["gate"]
    assert (gate["verdict"], gate["stopped"], gate["not_run"]) == ("failed", "max_cost", 40 - ran)
    step = (project / "gh.md").read_text()
    assert step.startswith("## ❌ Agent Test Farm: gate failed") and f"{40 - ran} case runs not run" in step

    report = runner.invoke(app, ["report", str(run_dir), "--format", "md"])
    assert report.exit_code == 0 and report.output.startswith("## ❌") and "✅" not in report.output, report.output
    text = runner.invoke(app, ["report", str(run_dir)])
    assert f"stopped: {40 - ran} case runs not run" in " ".join(text.output.split()), text.output  # the report wraps to the terminal
    whole = json.loads(runner.invoke(app, ["report", str(run_dir), "--json"]).output)
    assert (whole["runs"][0]["status"], whole["runs"][0]["not_run"]) == ("stopped", 40 - ran)
