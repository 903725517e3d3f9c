"""Several agents in one run (``-n A -n B``): every case on every agent, each row naming its
agent, on both engines, against agents behind a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.view import ViewApp, ViewServer


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


def test_quiet_labels_every_failure_line_with_its_agent_from_the_first(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    cases = [{"id": f"f{i}", "input": f"case {i}", "assertions": [{"type": "contains", "value": "absent"}]} for i in range(4)]
    (project / "failing.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    done = CliRunner().invoke(app, ["test", "-i", "failing.jsonl", "-n", "A", "-n", "B", "--runs", "2", "-q"])
    assert done.exit_code == 1, done.output
    lines = [line for line in done.output.splitlines() if line.startswith("✗ ")]
    assert len(lines) == 16  # every case run fails, on both agents
    assert all(line.startswith(("✗ A [", "✗ B [")) for line in lines), done.output


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
    assert json.loads((again.run_dir / "run.json").read_text())["connectors"] == {"A": "a", "B": "b"}
    assert {(r["agent"], r["status"]) for r in rows} == {("A", "passed"), ("B", "failed")}  # B's replies name model-b


def two_agent_run(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``farm test -n A -n B --runs 2`` in ``project``: B refuses c00, c03, c06 and c09, every try."""
    monkeypatch.chdir(project)
    done = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "B", "--runs", "2"])
    assert done.exit_code == 1, done.output
    (run_dir,) = (project / "results").iterdir()
    return run_dir


def test_farm_report_of_a_run_of_two_agents_gives_every_figure_per_agent(project: Path, monkeypatch):
    run_dir = two_agent_run(project, monkeypatch)
    runner = CliRunner()
    done = runner.invoke(app, ["report", "--json", str(run_dir)])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    # 12 cases x 2 tries x 1 turn each: 24 turns per agent, not the 48 a join without the agent makes
    assert [(row["group"], row["turns"]) for row in report["latency_by_agent"]] == [("A", 24), ("B", 24)]
    assert [(row["agent"], row["group"], row["turns"]) for row in report["latency_by_turn"]] == [("A", "1", 24), ("B", "1", 24)]
    assert {row["agent"]: row["connector"] for row in report["tokens"]} == {"A": "a", "B": "b"}
    stability = report["stability"]
    assert stability["cases"] == 12 and stability["agents"] == ["A", "B"]
    assert stability["classes_by_agent"]["A"]["stable"] == 12 and stability["classes_by_agent"]["B"]["consistently_failing"] == 4
    assert {(row["case_id"], row["agent"]) for row in stability["least_stable"]} == {(c, "B") for c in ("c00", "c03", "c06", "c09")}
    assert [(stats["agent"], stats["tries"], stats["passes"]) for stats in report["agents"]] == [("A", 24, 24), ("B", 24, 16)]
    assert [(row["agent"], row["count"], row["cases"]) for row in report["failed_assertions"]] == [("B", 8, 4)]
    assert [(own["agent"], own["counts"]["total"], own["counts"]["failed"]) for own in report["summary"]["per_agent"]] == [("A", 24, 0), ("B", 24, 8)]
    assert report["runs"][0]["per_agent"][1]["counts"]["pass_rate"] == pytest.approx(16 / 24)
    # no pass rate of both agents' case runs together (40 of 48) reads as one agent's
    assert report["summary"]["counts"]["pass_rate"] is None and report["runs"][0]["counts"]["pass_rate"] is None
    text = runner.invoke(app, ["report", str(run_dir)], env={"COLUMNS": "200"}).output
    summary = text.split("Summary")[1]
    assert "83.3%" not in text and "  Agent A" in summary and "  Agent B" in summary
    assert [line.split(":")[1].split()[0] for line in summary.splitlines() if "Pass rate:" in line][:2] == ["100.0%", "66.7%"]
    assert "Stability over 12 cases, per agent" in text and "  B: 8 stable, 4 consistently_failing" in text
    header = [line for line in text.split("Pass rate per case (lowest first)")[1].splitlines() if line.strip()][0]
    assert header.split()[:2] == ["Case", "Agent"]


def test_two_runs_of_two_agents_compare_each_agent_under_its_own_name(project: Path, monkeypatch):
    first = two_agent_run(project, monkeypatch)
    second_done = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "B", "--run", "c0[0-5]"])
    assert second_done.exit_code == 1, second_done.output
    (second,) = [path for path in (project / "results").iterdir() if path != first]
    report = json.loads(CliRunner().invoke(app, ["report", "--json", str(first), str(second)]).output)
    assert [[(own["agent"], own["counts"]["total"]) for own in run["per_agent"]] for run in report["runs"]] == [[("A", 24), ("B", 24)], [("A", 6), ("B", 6)]]
    text = CliRunner().invoke(app, ["report", str(first), str(second)], env={"COLUMNS": "200"}).output
    assert "oldest first, each agent apart" in text and f"{second.name}  B " in text
    runs = [comparison for comparison in report["comparisons"] if comparison["kind"] == "runs"]
    assert [(c["a_agent"], c["b_agent"], c["cases"]) for c in runs] == [("A", "A", 6), ("B", "B", 6)]
    assert runs[0]["a"] == f"{first.name} (A)" and runs[1]["b"] == f"{second.name} (B)"  # two titles that say which agent
    assert report["comparison"]["regressions_total"] == 0 and report["comparison"]["fixes_total"] == 0  # per agent: B failed c00 and c03 in both
    # A against B within each run: each name says which run, in --json and in the table's rows
    within = [(c["a"], c["b"]) for c in report["comparisons"] if c["kind"] == "agents"]
    assert within == [(f"{first.name} (A)", f"{first.name} (B)"), (f"{second.name} (A)", f"{second.name} (B)")]
    table = text.split("Paired comparisons")[1]
    assert f"{first.name} (A)" in table and f"{second.name} (B)" in table


def test_the_view_compares_runs_of_two_different_agents_under_their_names(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    names: list[str] = []
    for agent in ("A", "B"):
        done = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "-n", agent, "--run", "c0[0-5]"])
        assert done.exit_code == (0 if agent == "A" else 1), done.output
        names += [path.name for path in (project / "results").iterdir() if path.name not in names]
    first, second = names  # A's run, then B's (both may start in the same second)
    data = ViewApp(str(project / "results")).answer(["compare"], {"a": [first], "b": [second]})
    assert (data["a"]["label"], data["b"]["label"]) == (f"{first} · A", f"{second} · B")
    assert data["statistics"]["sentence"].startswith(f"{second} · B passes ") and f"than {first} · A" in data["statistics"]["sentence"]


def test_the_html_report_of_two_agents_gives_each_its_pass_rate_and_latency(project: Path, monkeypatch):
    monkeypatch.chdir(project)
    done = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "-n", "A", "-n", "B", "--html", "report.html"])
    assert done.exit_code == 1, done.output
    page = (project / "report.html").read_text(encoding="utf-8")
    figures = dict(re.findall(r'<div class="num" id="([\w-]+)"[^>]*>([^<]*)</div>', page))
    assert "pass-rate" not in figures and "latency-avg" not in figures and 'id="latency-chart"' not in page
    by_label = {label: value for _, value, label in re.findall(r'id="([\w-]+)"[^>]*>([^<]*)</div><div class="lbl">([^<]*)</div>', page)}
    assert (by_label["pass rate of A"], by_label["pass rate of B"]) == ("100.0%", "66.7%")  # numbered as the agents table
    assert by_label["avg turn latency of A"].endswith(" ms") and by_label["avg turn latency of B"].endswith(" ms")
    assert "Turn latency of A (12 turns)" in page and "Turn latency of B (12 turns)" in page
    assert 'id="latency-chart-0"' in page and 'id="latency-chart-1"' in page


def get_json(server, path: str) -> dict:
    with urllib.request.urlopen(f"{server.url}{path.lstrip('/')}", timeout=30) as response:
        return json.loads(response.read())


def test_farm_view_of_a_run_of_two_agents_shows_each_agents_own_conversations(project: Path, monkeypatch):
    run_dir = two_agent_run(project, monkeypatch)
    server = ViewServer(ViewApp(str(project / "results")))
    server.start()
    try:
        name = run_dir.name
        (summary,) = get_json(server, "/api/runs")["runs"]
        assert summary["agents"] == ["A", "B"] and summary["counts"]["failed"] == 8 and summary["problems"] == []
        assert [(a["agent"], a["counts"]["failed"], a["pass_rate"]) for a in summary["per_agent"]] == [("A", 0, 1.0), ("B", 8, 16 / 24)]
        assert summary["pass_rate"] is None  # each agent's own above, none of both together
        assert get_json(server, f"/api/runs/{name}")["info"]["connectors"] == {"A": "a", "B": "b"}
        (suite,) = summary["suites"]
        trend = get_json(server, f"/api/trends?suite={urllib.parse.quote(suite)}&agent=B")
        assert trend["agents"] == ["A", "B"] and [(p["agents"], p["total"], p["pass_rate"]) for p in trend["points"]] == [(["B"], 24, 16 / 24)]
        # B's case: B's turns only, with B's verdicts, one turn per try
        detail = get_json(server, f"/api/runs/{name}/cases/c03?agent=B")
        assert [rep["case"]["agent"] for rep in detail["repetitions"]] == ["B", "B"]
        assert [[turn["output"] for turn in rep["turns"]] for rep in detail["repetitions"]] == [["I cannot help with that."]] * 2
        assert [[check["passed"] for check in rep["checks"]] for rep in detail["repetitions"]] == [[False]] * 2
        assert detail["stability"] == {"runs": 2, "passed": 0, "pass_rate": 0.0, "class": "consistently_failing"}
        both = get_json(server, f"/api/runs/{name}/cases/c03")
        # without ?agent= the run's first agent is shown, named, and the others listed: never two agents' tries on one page
        assert both["agent"] == "A" and both["agents"] == ["A", "B"]
        assert [rep["case"]["agent"] for rep in both["repetitions"]] == ["A", "A"] and both["stability"]["class"] == "stable"
        # a search finds B's replies, not A's case runs of the same case
        found = get_json(server, f"/api/runs/{name}/cases?q=cannot+help&limit=100")
        assert found["total"] == 8 and {row["agent"] for row in found["rows"]} == {"B"}
        assert get_json(server, f"/api/runs/{name}/cases?agent=B&status=failed")["total"] == 8
        # compare: A against B, and the run against itself case by case and agent by agent
        agents = get_json(server, f"/api/compare?a={name}&agent_a=A&agent_b=B")
        assert agents["statistics"]["paired"] == 12 and agents["changes"]["regression"] == 4
        itself = get_json(server, f"/api/compare?a={name}&b={name}&limit=100")
        assert itself["total"] == 24 and itself["changes"]["same"] == 24
        assert {(row["case_id"], row["agent"], row["a"]["outcome"]) for row in itself["rows"] if row["case_id"] == "c03"} == {
            ("c03", "A", "passed"), ("c03", "B", "failed")
        }
    finally:
        server.shutdown()
        server.server_close()
