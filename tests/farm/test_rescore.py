"""``farm.rescore``: a run's recorded conversations re-judged with an edited suite, the agent server stopped."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import farm
from farm.agents.base import AgentError, Reply
from farm.cases import TestCase
from farm.config import load_config
from farm.conversation.digest import changed_inputs, inputs_digest
from farm.conversation.replay import RecordingEnds, Replay, ReplayClient, ReplayClock
from farm.conversation.runner import RunSettings, run_case
from farm.demo.server import JSONServer
from farm.errors import UsageError
from farm.results import CaseResult, Status, StepReply, ToolCallRecord, TurnResult
from farm.roles.types import RoleError, RoleRequest, SimulatorTurn
from farm.suite.loader import parse_cases
from tests.scripted import Counting, RoleModels, ScriptedAgent, farm_toml, roles_toml

DYNAMIC = {"simulator": {"use": "sim", "goal": "file a travel expense"}, "max_turns": 6}

SUITE: list[dict[str, Any]] = [
    {"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense assistant"}]},
    {"id": "strict", "input": "Hello", "assertions": [{"type": "contains", "value": "PO number"}]},
    {"id": "changed", "input": "Hello", "assertions": [{"type": "contains", "value": "Hello"}]},
    {"id": "slow", "input": "slow 0.3", "assertions": [{"type": "latency", "value": 5000}]},
    {"id": "judged", "input": "Hello", "assertions": [{"type": "agent", "use": "agents:val", "value": "expense"}]},
    {
        "id": "file",
        "turns": [
            {"input": "I want to submit a travel expense of $500", "assertions": [{"type": "tool_called", "value": "create_expense"}]},
            {"input": "Yes, confirm", "assertions": [{"type": "contains", "value": "submitted"}]},
        ],
        "final_assertions": [{"type": "json_path", "path": "$.expense.status", "value": "submitted"}],
    },
    {"id": "two", "turns": [{"input": "Hello"}, {"input": "What is the travel policy?", "assertions": [{"type": "contains", "value": "policy"}]}]},
    {
        "id": "dyn",
        **DYNAMIC,
        "checkpoints": [
            {"id": "asked", "assertion": {"type": "contains", "value": "What type"}},
            {"id": "drafted", "assertion": {"type": "contains", "value": "drafted"}, "after": ["asked"]},
        ],
    },
    {
        "id": "dyn-done",
        **DYNAMIC,
        "checkpoints": [
            {"id": "asked", "assertion": {"type": "contains", "value": "What type"}},
            {"id": "submitted", "assertion": {"type": "contains", "value": "submitted"}, "after": ["asked"]},
        ],
    },
    {"id": "broken", "input": "always 500"},
    {
        "id": "scripted-mock",
        "input": "A $700 hotel expense",
        "tool_mocks": {"create_expense": "scripts:mocks.create"},
        "final_assertions": [{"type": "json_path", "path": "$.expense.id", "value": "S-700"}],
    },
]

RUN_STATUSES = {
    "greet": "passed",
    "strict": "failed",
    "changed": "passed",
    "slow": "passed",
    "judged": "passed",
    "file": "passed",
    "two": "passed",
    "dyn": "passed",
    "dyn-done": "passed",
    "broken": "error",
    "scripted-mock": "passed",
}


def edited_suite() -> list[dict[str, Any]]:
    cases = {c["id"]: json.loads(json.dumps(c)) for c in SUITE}
    cases["greet"]["assertions"] = [{"type": "contains", "value": "weather forecast"}]  # tightened
    cases["strict"]["assertions"] = [{"type": "contains", "value": "expense"}]  # loosened
    cases["changed"]["input"] = "Hi there"  # the conversation would differ
    cases["slow"]["assertions"] = [{"type": "latency", "value": 100}]  # judged on the recorded time
    cases["file"]["turns"][0]["assertions"].append({"type": "tool_result", "value": {"tool": "create_expense", "result": {"expense": {"status": "draft"}}}})
    cases["two"]["turns"][1]["input"] = "Tell me the policy"
    cases["dyn"]["checkpoints"].append({"id": "amount", "assertion": {"type": "contains", "value": "$3500"}, "after": ["asked"]})
    cases["dyn-done"]["checkpoints"].append({"id": "policy", "assertion": {"type": "contains", "value": "travel policy"}})
    return list(cases.values())


EDITED_STATUSES = {
    **RUN_STATUSES,
    "greet": "failed",
    "strict": "passed",
    "changed": "error",
    "slow": "failed",
    "two": "error",
    "dyn-done": "failed",
}


def write_suite(path: Path, cases: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def statuses(jsonl: Path) -> dict[str, str]:
    return {r["id"]: r["status"] for r in map(json.loads, jsonl.read_text().splitlines())}


def records(jsonl: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, jsonl.read_text().splitlines())}


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory):
    """A run of SUITE against the scripted agent, whose server is stopped afterwards."""
    folder = tmp_path_factory.mktemp("rescore")
    agent, roles = Counting(ScriptedAgent()), RoleModels()
    role_server = JSONServer(roles).start()
    with JSONServer(agent) as server:
        (folder / "farm.toml").write_text(farm_toml(server.url, engine="local") + roles_toml(role_server.url))
        (folder / "scripts").mkdir()
        (folder / "scripts" / "mocks.py").write_text('def create(args):\n    return {"expense": {"id": f"S-{args[\'amount\']}"}}\n')
        suite = write_suite(folder / "suite.jsonl", SUITE)
        result = farm.run(str(suite), config=folder / "farm.toml", quiet=True)
        # a rescore answers scripts: mocks from the recording, not from the (now changed) script
        (folder / "scripts" / "mocks.py").write_text('def create(args):\n    return {"expense": {"id": "changed"}}\n')
    yield folder, result, agent, roles
    role_server.stop()


def test_the_run_records_what_replay_needs(recorded_run):
    folder, result, agent, _ = recorded_run
    assert statuses(result.results) == RUN_STATUSES
    rows = records(result.results)
    first = rows["file"]["turns"][0]
    assert first["steps"] == 2 and len(first["replies"]) == 2
    assert [c["step"] for c in first["tool_calls"]] == [1]
    assert first["replies"][0]["content"] == "" and first["replies"][1]["content"] is None  # the second is the output
    assert rows["dyn-done"]["inputs_digest"]["simulator"] != rows["greet"]["inputs_digest"]["simulator"]
    assert agent.requests > 0


def test_rescore_without_the_cache_asks_the_judge_again(recorded_run):
    folder, run, agent, roles = recorded_run
    before, judged = agent.requests, roles.calls["val"]
    outcome = farm.rescore(run.run_dir, config=folder / "farm.toml", quiet=True, cache=False)
    assert agent.requests == before
    assert roles.calls["val"] > judged
    assert outcome.summary is not None and outcome.summary.cache_hits == 0


def test_rescore_follows_the_edits_without_calling_the_agent(recorded_run):
    folder, run, agent, roles = recorded_run
    before, judged, simulated = agent.requests, roles.calls["val"], roles.calls["sim"]
    edited = write_suite(folder / "edited.jsonl", edited_suite())
    outcome = farm.rescore(run.run_dir, str(edited), config=folder / "farm.toml", quiet=True)

    assert agent.requests == before  # the agent's server is stopped and got nothing
    # the judge's verdict on an unchanged conversation comes from the role cache the run filled
    assert roles.calls["sim"] == simulated and roles.calls["val"] == judged
    assert outcome.summary is not None and outcome.summary.cache_hits >= 1
    assert statuses(outcome.results) == EDITED_STATUSES
    assert outcome.exit_code == 1 and outcome.run_dir != run.run_dir and outcome.run_id != run.run_id
    rows = records(outcome.results)
    assert rows["changed"]["rescorable"] is False
    assert rows["changed"]["error"] == "not rescorable: the case's input or attachments changed since the run; rerun it"
    assert rows["two"]["error"] == "not rescorable: turn 2's input changed since the run; rerun it"
    assert rows["greet"]["rescorable"] is True and rows["greet"]["rescored_from"] == run.run_id
    amount = next(c for c in rows["dyn"]["checkpoints"] if c["id"] == "amount")
    assert amount["reached"] and amount["reached_at_turn"] == 2
    assert "completed with checkpoints missing: policy" in rows["dyn-done"]["error"]
    assert rows["slow"]["turns"][0]["duration_ms"] == records(run.results)["slow"]["turns"][0]["duration_ms"] >= 300
    assert rows["broken"]["error"] == records(run.results)["broken"]["error"]

    info = json.loads((outcome.run_dir / "run.json").read_text())
    assert info["rescored_from"] == {"run_id": run.run_id, "run_dir": str(run.run_dir)}
    assert info["not_rescorable"] == outcome.summary.not_rescorable == 2 and info["counts"]["failed"] == 3
    lines = outcome.results.read_text().splitlines()
    assert pq.read_table(outcome.run_dir / "cases.parquet").num_rows == len(lines) == len(SUITE)
    assert pq.read_table(outcome.run_dir / "turns.parquet").num_rows == sum(len(json.loads(line)["turns"]) for line in lines)
    cases = pq.read_table(outcome.run_dir / "cases.parquet").to_pylist()
    assert {c["case_id"] for c in cases if c["rescorable"] is False} == {"changed", "two"}


def test_the_rescore_records_its_own_options_and_the_runs_that_shaped_the_conversations(recorded_run, tmp_path: Path):
    folder, run, _, _ = recorded_run
    source = tmp_path / "source"
    shutil.copytree(run.run_dir, source)
    info = json.loads((source / "run.json").read_text())
    info["options"].update(timeout=42.0, retries=2, update_golden=str(tmp_path / "golden"), fail_fast=True)
    (source / "run.json").write_text(json.dumps(info))
    outcome = farm.rescore(source, config=folder / "farm.toml", match="greet", cache=False, quiet=True)
    options = json.loads((outcome.run_dir / "run.json").read_text())["options"]
    assert (options["timeout"], options["on_missing_input"], options["match"], options["cache"]) == (42.0, "skip", "greet", False)
    assert (options["retries"], options["update_golden"], options["fail_fast"], options["tags"]) == (0, None, False, [])


def test_a_rescore_keeps_the_runs_selection_unless_given_its_own(tmp_path: Path):
    """A run of ``--run REGEX`` recorded only the cases it selected: its rescore selects the same."""
    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        suite = write_suite(tmp_path / "suite.jsonl", SUITE[:3])
        run = farm.run(str(suite), config=tmp_path / "farm.toml", match="^(greet|strict)$", quiet=True)
    outcome = farm.rescore(run.run_dir, config=tmp_path / "farm.toml", quiet=True)
    assert statuses(outcome.results) == {"greet": "passed", "strict": "failed"}
    assert outcome.summary is not None and outcome.summary.not_rescorable == 0
    options = json.loads((outcome.run_dir / "run.json").read_text())["options"]
    assert (options["match"], options["tags"]) == ("^(greet|strict)$", [])
    narrowed = farm.rescore(run.run_dir, config=tmp_path / "farm.toml", match="greet", quiet=True)
    assert statuses(narrowed.results) == {"greet": "passed"}


def test_a_run_written_outside_its_configs_results_dir_is_rescored_beside_it_with_its_cache(tmp_path: Path):
    """As ``farm demo`` does, the run's results_dir is not its farm.toml's: the rescore's folder and
    role cache are the run's (the validator's verdict comes from the cache the run filled)."""
    agent, roles = Counting(ScriptedAgent()), RoleModels()
    elsewhere = tmp_path / "elsewhere"
    with JSONServer(roles) as role_server, JSONServer(agent) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local") + roles_toml(role_server.url))
        config = load_config(tmp_path / "farm.toml")
        config.farm.results_dir = str(elsewhere)
        suite = write_suite(tmp_path / "suite.jsonl", [c for c in SUITE if c["id"] in ("greet", "judged")])
        run = farm.run(str(suite), config=config, quiet=True)
        assert run.run_dir.parent == elsewhere and roles.calls["val"] == 1
        outcome = farm.rescore(run.run_dir, quiet=True)  # the config is the run's farm.toml, as run.json says
    assert outcome.run_dir.parent == elsewhere and outcome.results == outcome.run_dir / "results.jsonl"
    assert not (tmp_path / "results").exists()
    assert statuses(outcome.results) == {"greet": "passed", "judged": "passed"}
    assert roles.calls["val"] == 1
    assert outcome.summary is not None and outcome.summary.role_calls == outcome.summary.cache_hits == 1
    recorded = json.loads((outcome.run_dir / "run.json").read_text())["config"]["farm"]["results_dir"]
    assert Path(recorded) == elsewhere


def test_rescore_with_the_runs_own_suite_gives_the_runs_statuses(recorded_run):
    folder, run, agent, roles = recorded_run
    before, simulated = agent.requests, roles.calls["sim"]
    outcome = farm.rescore(run.run_dir, config=folder / "farm.toml", quiet=True)
    assert statuses(outcome.results) == RUN_STATUSES
    assert agent.requests == before and roles.calls["sim"] == simulated
    old, new = records(run.results), records(outcome.results)
    for case_id in old:
        assert [t["output"] for t in new[case_id]["turns"]] == [t["output"] for t in old[case_id]["turns"]]
        assert new[case_id]["usage"] == old[case_id]["usage"]


def test_a_checkpoint_past_the_recording_is_not_rescorable(recorded_run):
    """``dyn`` passed at turn 2 while the agent still asked; a checkpoint it had not reached needs turn 3."""
    folder, run, _, _ = recorded_run
    cases = [c for c in edited_suite() if c["id"] == "dyn"]
    cases[0]["checkpoints"].append({"id": "submitted", "assertion": {"type": "contains", "value": "submitted"}})
    outcome = farm.rescore(run.run_dir, str(write_suite(folder / "more.jsonl", cases)), config=folder / "farm.toml", match="^dyn$", quiet=True)
    row = records(outcome.results)["dyn"]
    assert row["status"] == "error" and row["rescorable"] is False
    assert row["error"].startswith("not rescorable: the run's conversation ends at turn 2")


def test_every_run_of_a_case_is_rescored_and_run_filters(tmp_path: Path):
    agent = Counting(ScriptedAgent())
    with JSONServer(agent) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        suite = write_suite(tmp_path / "suite.jsonl", SUITE[:2])
        run = farm.run(str(suite), config=tmp_path / "farm.toml", runs=2, quiet=True)
    before = agent.requests
    outcome = farm.rescore(run.run_dir, config=tmp_path / "farm.toml", match="^greet$", quiet=True)
    rows = [json.loads(line) for line in outcome.results.read_text().splitlines()]
    assert sorted((r["id"], r["run_index"], r["status"]) for r in rows) == [("greet", 0, "passed"), ("greet", 1, "passed")]
    assert agent.requests == before and outcome.exit_code == 0


def test_a_rescore_is_judged_by_the_runs_own_gate(tmp_path: Path):
    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        suite = write_suite(tmp_path / "suite.jsonl", SUITE[:3])
        run = farm.run(str(suite), config=tmp_path / "farm.toml", match="^(greet|strict)$", runs=2, min_pass_rate=0.5, quiet=True)
    assert run.exit_code == 1  # strict fails every try: below any gate
    passing = farm.rescore(run.run_dir, config=tmp_path / "farm.toml", match="^greet$", quiet=True)
    gate = json.loads((passing.run_dir / "run.json").read_text())["gate"]
    assert (gate["min_pass_rate"], gate["verdict"], passing.exit_code) == (0.5, "passed", 0)
    failing = farm.rescore(run.run_dir, config=tmp_path / "farm.toml", quiet=True)
    gate = json.loads((failing.run_dir / "run.json").read_text())["gate"]
    assert (gate["verdict"], failing.exit_code) == ("failed", 1) and "1 of 2 cases below their gate" in gate["sentence"]


def test_a_folder_that_is_not_a_run_is_one_sentence(tmp_path: Path):
    with pytest.raises(UsageError, match="is not a run folder"):
        farm.rescore(tmp_path)


# -- units -----------------------------------------------------------------


def _recorded() -> CaseResult:
    return CaseResult(
        id="c",
        status=Status.PASSED,
        turns=[
            TurnResult(
                turn=1,
                input="buy",
                output="Drafted.",
                duration_ms=250.0,
                steps=2,
                tool_calls=[ToolCallRecord(id="call_1", name="create", args={"n": 1}, result={"ok": 1}, mocked=True, step=1)],
                replies=[StepReply(content=""), StepReply(awaiting_input=False)],
            ),
            TurnResult(turn=2, input="ok", output="", steps=1, error="agent error: boom", duration_ms=40.0),
        ],
    )


def test_the_replay_client_answers_each_recorded_step_then_ends():
    clock = ReplayClock()
    client = ReplayClient(_recorded(), clock, {"create": "scripts:mocks.create"})
    first = asyncio.run(client.send([], {}))
    assert first.content == "" and [c.name for c in first.tool_calls] == ["create"] and first.tool_calls[0].id == "call_1"
    assert client.script_results == [{"ok": 1}]
    assert clock() == pytest.approx(0.25)
    second = asyncio.run(client.send([], {}))
    assert second.content == "Drafted." and second.awaiting_input is False and not second.tool_calls
    assert clock() == pytest.approx(0.25)  # one turn moves the clock once
    with pytest.raises(RecordingEnds):  # turn 2 ended in an agent error
        asyncio.run(client.send([], {}))
    assert client.ended and clock() == pytest.approx(0.29)


def _case(**fields: Any) -> TestCase:
    return TestCase.model_validate({"id": "c", **fields})


def test_the_digest_leaves_out_what_only_judges():
    settings = RunSettings(agent_id="bot")
    base = _case(turns=[{"input": "a", "assertions": [{"type": "contains", "value": "x"}]}, {"input": "b"}])
    judged = _case(name="n", tags=["t"], turns=[{"input": "a"}, {"input": "b", "assertions": ["not_contains"]}], final_assertions=[{"type": "equals", "value": 1}])
    assert inputs_digest(base, settings) == inputs_digest(judged, settings)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"turns": [{"input": "a"}, {"input": "c"}]}, "turn 2's input changed since the run"),
        ({"turns": [{"input": "a"}]}, "the case has 1 turns now, 2 in the run"),
        ({"turns": [{"input": "a"}, {"input": "b", "options": {"metadata": {"k": 1}}}]}, "a turn's attachments or options changed since the run"),
        ({"tool_mocks": {"t": {"ok": 2}}}, "the tool mocks changed since the run"),
        ({"max_turns": 3}, "max_turns is 3 now, 20 in the run"),
        ({"options": {"metadata": {"user": "u"}}}, "the options sent to the agent changed since the run"),
    ],
)
def test_changed_inputs_names_what_changed(change: dict[str, Any], reason: str):
    settings = RunSettings(agent_id="bot")
    recorded = _case(turns=[{"input": "a"}, {"input": "b"}])
    turns = [TurnResult(turn=1, input="a"), TurnResult(turn=2, input="b")]
    edited = _case(**{"turns": [{"input": "a"}, {"input": "b"}], **change})
    assert changed_inputs(inputs_digest(recorded, settings), inputs_digest(edited, settings), turns, edited) == reason
    assert changed_inputs(inputs_digest(recorded, settings), inputs_digest(recorded, settings), turns, recorded) is None


def test_the_simulator_config_is_an_input():
    settings = RunSettings(agent_id="bot", default_simulator="sim")
    checkpoints = [{"id": "a", "assertion": {"type": "contains", "value": "x"}}]
    one = _case(checkpoints=checkpoints, simulator={"use": "sim", "goal": "buy"})
    other = _case(checkpoints=checkpoints, simulator={"use": "sim", "goal": "sell"})
    reason = changed_inputs(inputs_digest(one, settings), inputs_digest(other, settings), [], other)
    assert reason == "the simulator (its agent, goal, persona or options) changed since the run"


class _Agent:
    """Answers every user message with a question, then declares it is done on 'done'."""

    def __init__(self, fail_on: str | None = None):
        self.fail_on = fail_on

    async def send(self, messages: list[dict[str, Any]], options: dict[str, Any]) -> Reply:
        text = messages[-1]["content"]
        if self.fail_on and self.fail_on in text:
            raise AgentError("boom")
        return Reply(content="Filed." if "done" in text else "Anything else?", awaiting_input=False if "done" in text else None)

    async def aclose(self) -> None:
        pass


class _Roles:
    assertion_env = None

    def __init__(self, answers: list[SimulatorTurn | Exception]):
        self.answers = answers
        self.calls = 0

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def ask_human(self, request: Any) -> None:
        return None

    async def mock_tool(self, mock: Any, arguments: Any) -> Any:
        raise AssertionError("no mocks here")

    async def run_hook(self, reference: str, payload: dict[str, Any]) -> Any:
        return None


def _live_then_replay(
    case: dict[str, Any], agent: _Agent, answers: list[Any], edited: dict[str, Any] | None = None, older: bool = False
) -> tuple[CaseResult, CaseResult, _Roles]:
    """``older``: the live result as a run written before results had ``ended_by`` reads back."""
    settings = RunSettings(agent_id="bot", run_id="r1")
    (loaded,) = parse_cases([("t.jsonl:1", case)])
    live = asyncio.run(run_case(loaded, agent, _Roles(answers), settings))
    line = live.model_dump(mode="json", exclude={"ended_by"} if older else None)
    live = CaseResult.model_validate(line)  # as read back from the JSONL
    (again,) = parse_cases([("t.jsonl:1", edited or case)])
    roles = _Roles([])
    replay = Replay({live.run_key("bot"): live}, "r1")
    return live, asyncio.run(replay.run(again, 0, roles, dataclasses.replace(settings, run_id="r2"))), roles


CHECKS = [{"id": "asked", "assertion": {"type": "contains", "value": "else"}}, {"id": "filed", "assertion": {"type": "contains", "value": "Filed"}}]


def test_a_simulator_error_at_the_recordings_end_is_replayed_as_recorded():
    case = {"id": "d", "simulator": {"use": "sim"}, "checkpoints": CHECKS}
    live, again, roles = _live_then_replay(case, _Agent(), [SimulatorTurn(input="hi"), RoleError("no JSON")])
    assert live.status == again.status == Status.ERROR and again.error == live.error == "simulator error: no JSON"
    assert live.error_role == again.error_role == "simulator"
    assert len(again.turns) == 1 and roles.calls == 0 and again.rescorable is True


def test_a_simulator_error_recorded_as_skipped_by_an_older_farm_is_rescored_as_an_error():
    case = {"id": "d", "simulator": {"use": "sim"}, "checkpoints": CHECKS}
    settings = RunSettings(agent_id="bot", run_id="r1")
    (loaded,) = parse_cases([("t.jsonl:1", case)])
    live = asyncio.run(run_case(loaded, _Agent(), _Roles([SimulatorTurn(input="hi"), RoleError("no JSON")]), settings))
    line = live.model_dump(mode="json", exclude={"error_role"})
    old = CaseResult.model_validate({**line, "status": "skipped", "schema_version": 3})
    again = asyncio.run(Replay({old.run_key("bot"): old}, "r1").run(loaded, 0, _Roles([]), dataclasses.replace(settings, run_id="r2")))
    assert (again.status, again.error_role, again.error) == (Status.ERROR, "simulator", "simulator error: no JSON")


def test_a_case_that_ended_on_an_unreachable_endpoint_is_replayed_without_stopping_the_rescore():
    from farm.errors import EndpointUnreachable

    class Unreachable(_Agent):
        async def send(self, messages, options):
            raise EndpointUnreachable("connector 'c' at http://127.0.0.1:9/v1 cannot be reached: 10 connections failed")

    case = {"id": "s", "turns": [{"input": "one"}, {"input": "two"}]}
    live, again, _ = _live_then_replay(case, Unreachable(), [])
    assert (live.status, live.ended_by) == (Status.ERROR, "unreachable") and live.error.startswith("connector 'c' at ")
    assert (again.status, again.error, again.ended_by, again.rescorable) == (Status.ERROR, live.error, "agent", True)


def test_the_simulators_goal_is_replayed():
    case = {"id": "d", "simulator": {"use": "sim"}, "checkpoints": CHECKS}
    live, again, _ = _live_then_replay(case, _Agent(), [SimulatorTurn(input="hi"), SimulatorTurn(goal_achieved=True)])
    assert live.goal_achieved_at == 2
    assert live.status == again.status == Status.FAILED and again.error == live.error
    assert "goal is achieved" in (again.error or "")


def test_an_agent_error_is_replayed_and_a_loosened_case_past_it_is_not_rescorable():
    case = {"id": "s", "turns": [{"input": "one"}, {"input": "two"}, {"input": "done"}]}
    live, again, _ = _live_then_replay(case, _Agent(fail_on="two"), [])
    assert live.status == again.status == Status.ERROR and again.error == live.error and again.turns[-1].error == live.turns[-1].error
    failing = {"id": "s", "turns": [{"input": "one", "assertions": [{"type": "contains", "value": "nope"}]}, {"input": "two"}, {"input": "done"}]}
    live, again, _ = _live_then_replay(failing, _Agent(), [], edited=case)
    assert live.status == Status.FAILED and again.status == Status.ERROR and again.rescorable is False
    assert again.error == "not rescorable: the run's conversation ends at turn 1 (failed), and the edited case goes on past it; rerun it"


@pytest.mark.parametrize("older", [False, True], ids=["ended_by", "written before ended_by"])
def test_a_recording_that_the_agent_or_the_simulator_ended_is_replayed_to_that_end(older: bool):
    dynamic = {"id": "d", "simulator": {"use": "sim"}, "checkpoints": CHECKS}
    live, again, _ = _live_then_replay(dynamic, _Agent(), [SimulatorTurn(input="hi"), RoleError("no JSON")], older=older)
    assert live.ended_by == again.ended_by == (None if older else "simulator")
    assert (again.status, again.error, again.rescorable) == (Status.ERROR, "simulator error: no JSON", True)
    assert again.error_role == "simulator"
    static = {"id": "s", "turns": [{"input": "one"}, {"input": "two"}, {"input": "done"}]}
    live, again, _ = _live_then_replay(static, _Agent(fail_on="two"), [], older=older)
    assert live.ended_by == again.ended_by == (None if older else "agent")
    assert (again.status, again.error, again.rescorable) == (Status.ERROR, live.error, True)
