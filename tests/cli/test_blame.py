"""Whose failure it is, end to end: simulators that play the user well and badly, flagged turn by
turn and blamed, on both engines.

The agent under test and the scripted simulators run behind real HTTP servers on 127.0.0.1; the
python simulators are functions of a module beside the farm.toml.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer
from tests.scripted import RoleModels, ScriptedAgent, farm_toml, roles_toml

GOAL = {"options": {"metadata": {"goal": "file a $3500 travel expense"}}}
CHECKPOINTS = [
    {"id": "ask_type", "assertion": {"type": "contains", "value": "type"}},
    {"id": "create", "after": ["ask_type"], "assertion": {"type": "tool_called", "name": "create_expense"}},
    {"id": "done", "after": ["create"], "assertion": {"type": "contains", "value": "submitted"}},
]
BROKEN_AGENT = '\n[connectors.broken]\nbase_url = "{url}/v1"\nmodel = "broken"\n\n[agents.broken]\nkind = "openai"\nconnector = "broken"\n'


def case(case_id: str, simulator: str) -> dict:
    return {"id": case_id, "simulator": {**GOAL, "use": simulator}, "checkpoints": CHECKPOINTS, "max_turns": 5}


@pytest.fixture(scope="module")
def servers():
    models = RoleModels()
    with JSONServer(ScriptedAgent()) as agent, JSONServer(models) as roles:
        yield agent, roles, models


@pytest.fixture
def project(tmp_path: Path, servers, engine: str) -> Path:
    agent, roles, _ = servers
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine) + roles_toml(roles.url) + BROKEN_AGENT.format(url=agent.url))
    return tmp_path


def run(project: Path, cases: list[dict] | None, *args: str):
    out = project / "out.jsonl"
    if cases is not None:
        out.unlink(missing_ok=True)
        suite = project / "suite.jsonl"
        suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
        args = ("-i", str(suite), *args)
    result = CliRunner().invoke(app, ["test", *args, "-o", str(out), "--config", str(project / "farm.toml")], catch_exceptions=False)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, {r["id"]: r for r in records}


def flags(record: dict) -> list[list[str]]:
    return [t["sim_flags"] for t in record["turns"]]


def test_a_good_simulator_passes_and_each_faulty_one_is_blamed_on_its_turn(project: Path):
    cases = [case("good", "sim"), case("repeat", "sim-repeat"), case("assistant", "sim-assistant"), case("early", "sim-early")]
    result, got = run(project, cases)
    assert result.exit_code == 1, result.output
    good = got["good"]
    assert (good["status"], good["blame"], flags(good)) == ("passed", None, [[], [], []])
    repeat = got["repeat"]
    assert (repeat["status"], repeat["blame"]) == ("failed", "simulator")
    assert flags(repeat) == [[], ["repeat"], [], [], []]  # then the same answer to the same question
    assert repeat["blame_reason"] == "the simulator repeated an earlier user turn word for word at turn 2"
    assistant = got["assistant"]
    assert (assistant["status"], assistant["blame"], flags(assistant)[:2]) == ("failed", "simulator", [[], ["as_assistant"]])
    early = got["early"]
    assert (early["status"], early["blame"], flags(early)) == ("failed", "simulator", [[], ["early_end"]])
    assert "after turn 2" in early["blame_reason"] and "still asking" in early["blame_reason"]
    assert "3 failed: 3 simulator" in result.output
    assert "Simulator flags: repeat (repeated an earlier user turn" in result.output, result.output
    assert "blame: simulator" in result.output

    run_dir = next((project / "results").glob("*/run.json")).parent
    turns = pq.read_table(run_dir / "turns.parquet").to_pylist()
    assert {(t["case_id"], t["turn"]): t["sim_flags"] for t in turns}[("repeat", 2)] == ["repeat"]
    cases_table = {row["case_id"]: row for row in pq.read_table(run_dir / "cases.parquet").to_pylist()}
    assert cases_table["repeat"]["blame"] == "simulator" and cases_table["good"]["blame"] is None
    assert cases_table["early"]["blame_reason"] == early["blame_reason"]

    report = CliRunner().invoke(app, ["report", str(run_dir)], catch_exceptions=False)
    assert "3 failed: 3 simulator" in report.output, report.output
    markdown = CliRunner().invoke(app, ["report", str(run_dir), "--format", "md"], catch_exceptions=False)
    assert "Whose failures: 3 failed: 3 simulator" in markdown.output, markdown.output


def test_a_broken_agent_with_a_good_simulator_is_never_the_simulators_fault(project: Path):
    result, got = run(project, [case("broken", "sim")], "-n", "broken")
    assert result.exit_code == 1, result.output
    broken = got["broken"]
    assert broken["status"] == "failed" and broken["blame"] == "unknown", broken
    assert all(not f for f in flags(broken))  # the good simulator answered the same question the same way
    assert "1 failed: 1 unknown" in result.output


def test_attribute_asks_the_attributor_only_when_no_flag_settles_it(project: Path, servers):
    toml = project / "farm.toml"
    toml.write_text(toml.read_text().replace("[farm]\n", '[farm]\nattributor = "attr"\n', 1))
    _, _, models = servers
    before = models.calls["attr"]
    result, got = run(project, [case("broken", "sim"), case("repeat", "sim-repeat")], "-n", "broken", "--attribute")
    assert result.exit_code == 1, result.output
    assert (got["broken"]["blame"], got["broken"]["blame_reason"]) == ("agent", "the agent never drafted the expense (the attributor)")
    assert got["repeat"]["blame"] == "simulator" and "turn 2" in got["repeat"]["blame_reason"]  # settled by its flag
    assert models.calls["attr"] - before == 1  # asked once: for the case no flag settled
    assert "2 failed: 1 agent, 1 simulator" in result.output
    # asked again, the same question is answered from the role cache
    again, got = run(project, [case("broken", "sim")], "-n", "broken", "--attribute")
    assert got["broken"]["blame"] == "agent" and models.calls["attr"] - before == 1


def test_an_attributor_that_fails_is_said_and_blames_no_one(project: Path):
    toml = project / "farm.toml"
    toml.write_text(toml.read_text().replace("[farm]\n", '[farm]\nattributor = "attr-broken"\nattribute = true\n', 1))
    result, got = run(project, [case("broken", "sim")], "-n", "broken")
    assert result.exit_code == 1, result.output
    broken = got["broken"]
    assert broken["blame"] == "unknown"
    assert broken["blame_reason"].startswith("the attributor failed: the attributor answered no JSON: 'It is hard to say.'; it must answer {\"blame\"")


def test_attribute_without_an_attributor_is_a_usage_error_before_any_call(project: Path, servers):
    _, _, models = servers
    calls = sum(models.calls.values())
    result, got = run(project, [case("good", "sim")], "--attribute")
    assert result.exit_code == 2, result.output
    assert "--attribute: no attributor to ask; set [farm].attributor to a validator-kind agent" in result.output
    assert got == {} and sum(models.calls.values()) == calls


def test_simulator_failures_error_makes_the_simulators_fault_an_error_that_retry_errors_runs_again(project: Path):
    result, got = run(project, [case("repeat", "sim-repeat"), case("good", "sim")], "--simulator-failures", "error")
    assert result.exit_code == 1, result.output
    repeat = got["repeat"]
    assert (repeat["status"], repeat["error_role"], repeat["blame"]) == ("error", "simulator", "simulator")
    assert repeat["error"].startswith("simulator error: the simulator repeated an earlier user turn word for word at turn 2 (the case failed: max turns (5)")
    assert got["good"]["status"] == "passed"
    first = repeat["started_at"]
    run_dir = next((project / "results").glob("*/run.json")).parent
    again, got = run(project, None, "--resume", str(run_dir), "--retry-errors")
    assert again.exit_code == 1, again.output
    # run again, not kept as it was, and still an error: the resumed run's --simulator-failures holds
    assert got["repeat"]["started_at"] > first and got["repeat"]["status"] == "error"
    lines = [json.loads(line) for line in (project / "out.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == ["good", "repeat"]  # every case once


def test_a_plain_text_simulator_is_told_the_keys_it_must_answer(project: Path):
    result, got = run(project, [case("prose", "sim-broken")])
    assert result.exit_code == 1, result.output
    error = got["prose"]["error"]
    assert got["prose"]["error_role"] == "simulator"
    assert error.startswith("simulator error: the simulator answered no JSON: 'I would rather chat about the weather.'; it must answer {\"input\"")
    assert '"goal_achieved"' in error and '"reasoning"' in error


PYTHON_AGENTS = '''
from farm.demo.agent import reply_to


def target(messages, options):
    return reply_to(messages)


def _said(messages):
    return next((m["content"] for m in reversed(messages) if m["role"] == "assistant" and m.get("content")), "")


def good(messages, options):
    said = _said(messages).lower()
    if "submitted" in said:
        return {"goal_achieved": True, "reasoning": "done"}
    if "type" in said:
        return {"input": "Business travel, $3500", "goal_achieved": False, "reasoning": options["metadata"]["goal"]}
    if "confirm" in said:
        return {"input": "Yes, confirm", "goal_achieved": False}
    return {"input": "I want to submit an expense", "goal_achieved": False}


def looping(messages, options):
    return {"input": "I want to submit an expense", "goal_achieved": False}


def shapeless(messages, options):
    return {"text": "hello"}
'''

PYTHON_TOML = """
[farm]
default_agent = "target"
results_dir = "results"
engine = "{engine}"

[agents.target]
kind = "python"
entry = "{module}:target"
tool_mocks = { create_expense = { expense = { id = "EXP-1", status = "draft" } }, submit_expense = { expense = { id = "EXP-1", status = "submitted" } } }

[agents.good]
kind = "python"
entry = "{module}:good"

[agents.looping]
kind = "python"
entry = "{module}:looping"

[agents.shapeless]
kind = "python"
entry = "{module}:shapeless"
"""


def test_python_simulators_answering_dicts(tmp_path: Path, python_project, engine: str):
    python_project(textwrap.dedent(PYTHON_AGENTS), PYTHON_TOML.replace("{engine}", engine), {})
    cases = [case("good", "good"), case("looping", "looping"), case("shapeless", "shapeless")]
    result, got = run(tmp_path, cases)
    assert result.exit_code == 1, result.output
    assert got["good"]["status"] == "passed", got["good"]
    assert got["good"]["turns"][1]["simulator_reasoning"] == "file a $3500 travel expense"
    assert (got["looping"]["status"], got["looping"]["blame"], flags(got["looping"])[1]) == ("failed", "simulator", ["repeat"])
    shapeless = got["shapeless"]
    assert (shapeless["status"], shapeless["error_role"]) == ("error", "simulator")
    assert shapeless["error"].startswith("simulator error: the simulator's answer has no 'input' (its keys: 'text')")
