"""``--retries N``: a case that ended in an agent error or timeout runs again, on both engines,
against a scripted agent behind a real HTTP server on 127.0.0.1; ``farm report`` says how often."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from tests.scripted import farm_toml


class Flaky:
    """An agent that fails (400, which the connector does not retry) on purpose:

    - ``fail once <tag>``: the first request with this text fails, the next ones answer "recovered";
    - ``always fail``: every request fails;
    - ``slow``: answers after 1 second (past the tests' 300 ms turn timeout);
    - anything else: "hello".
    """

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path, body, headers):
        text = body["messages"][-1]["content"]
        with self._lock:
            self.seen[text] += 1
            count = self.seen[text]
        if text == "always fail" or (text.startswith("fail once") and count == 1):
            return Response({"error": {"message": f"refused (request {count})"}}, status=400)
        if text == "slow":
            return Response(chat_completion("late"), delay=1.0)
        return Response(chat_completion("recovered" if text.startswith("fail once") else "hello"))


@pytest.fixture(scope="module")
def server():
    agent = Flaky()
    with JSONServer(agent) as server:
        yield server, agent


@pytest.fixture
def project(tmp_path: Path, server, engine: str) -> Path:
    (tmp_path / "farm.toml").write_text(farm_toml(server[0].url, engine=engine))
    return tmp_path


def run(project: Path, cases: list[dict], **options) -> tuple[farm.RunResult, dict[str, dict]]:
    suite = project / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    result = farm.run(str(suite), config=project / "farm.toml", quiet=True, **options)
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len({r["id"] for r in rows}) == len(cases)  # every case exactly once
    return result, {r["id"]: r for r in rows}


def test_a_case_whose_agent_failed_once_passes_on_its_second_attempt(project: Path, server):
    agent = server[1]
    tag = f"fail once {project.name}"
    cases = [
        {"id": "flaky", "input": tag, "assertions": [{"type": "contains", "value": "recovered"}]},
        {"id": "wrong", "input": "hi", "assertions": [{"type": "contains", "value": "pirate"}]},
        {"id": "ok", "input": "hi"},
    ]
    result, rows = run(project, cases, retries=2)
    assert result.exit_code == 1  # "wrong" failed an assertion
    assert rows["flaky"]["status"] == "passed" and rows["flaky"]["attempt"] == 2
    [earlier] = rows["flaky"]["retried"]
    assert earlier["attempt"] == 1 and earlier["status"] == "error" and "400" in earlier["error"]
    assert agent.seen[tag] == 2
    assert rows["wrong"]["status"] == "failed" and rows["wrong"]["attempt"] == 1 and rows["wrong"]["retried"] == []
    assert rows["ok"]["attempt"] == 1

    report = CliRunner().invoke(app, ["report", str(result.run_dir)])
    assert report.exit_code == 0, report.output
    assert "Retries:" in report.output and "1 case runs retried (1 attempts again), 1 passed after a retry" in report.output
    data = json.loads(CliRunner().invoke(app, ["report", str(result.run_dir), "--json"]).output)
    assert data["summary"]["retries"] == {"cases": 1, "attempts": 1, "passed": 1}


def test_a_case_whose_agent_always_fails_runs_n_plus_1_times_and_ends_in_error(project: Path, server):
    agent = server[1]
    before = agent.seen["always fail"]
    late_case = {"id": "late", "input": "slow", "timeout": "300ms"}  # the down case's own limit stays long: a loaded machine is no timeout
    result, rows = run(project, [{"id": "down", "input": "always fail"}, late_case], retries=2)
    assert agent.seen["always fail"] - before == 3
    down = rows["down"]
    assert down["status"] == "error" and down["attempt"] == 3
    assert [(r["attempt"], r["status"]) for r in down["retried"]] == [(1, "error"), (2, "error")]
    assert "400" in down["error"]
    late = rows["late"]
    assert late["status"] == "timeout" and late["attempt"] == 3 and [r["status"] for r in late["retried"]] == ["timeout"] * 2
    assert result.summary is not None and result.summary.errors == 1 and result.summary.timeouts == 1


def test_without_retries_a_failed_agent_is_reported_at_once(project: Path, server):
    agent = server[1]
    before = agent.seen["always fail"]
    _, rows = run(project, [{"id": "down", "input": "always fail"}])
    assert agent.seen["always fail"] - before == 1
    assert rows["down"]["attempt"] == 1 and rows["down"]["retried"] == []


def test_retries_is_a_cli_option(tmp_path: Path, server):
    (tmp_path / "farm.toml").write_text(farm_toml(server[0].url, engine="local"))
    tag = f"fail once cli {tmp_path.name}"
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["test", "-i", tag, "--retries", "1", "-o", str(out), "--config", str(tmp_path / "farm.toml")])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["attempt"] == 2
    bad = CliRunner().invoke(app, ["test", "-i", "hi", "--retries", "-1", "--config", str(tmp_path / "farm.toml")])
    assert bad.exit_code == 2 and "--retries" in bad.output


def test_a_run_written_before_retries_existed_reports_none(tmp_path: Path, server):
    import pyarrow.parquet as pq

    (tmp_path / "farm.toml").write_text(farm_toml(server[0].url, engine="local"))
    result, _ = run(tmp_path, [{"id": "down", "input": "always fail"}], retries=1)
    cases = result.run_dir / "cases.parquet"
    table = pq.read_table(cases)
    assert table.column("retried").to_pylist() == [1]
    pq.write_table(table.drop_columns(["retried"]), cases)  # as an older farm wrote it
    report = CliRunner().invoke(app, ["report", str(result.run_dir), "--json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.output)["summary"]["retries"] == {"cases": 0, "attempts": 0, "passed": 0}
