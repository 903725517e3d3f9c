"""``farm test`` end to end: the real CLI, the session's real Ray, a real agent server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer
from tests.scripted import ScriptedAgent, farm_toml


@pytest.fixture(scope="module")
def scripted():
    agent = ScriptedAgent()
    with JSONServer(agent) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path, scripted: JSONServer, engine: str) -> Path:
    """A project folder whose farm.toml runs on ``engine`` (each test runs on both)."""
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine=engine))
    return tmp_path


@pytest.fixture
def ray_project(tmp_path: Path, scripted: JSONServer, ray_session) -> Path:
    """A project folder for what only the ray engine has (session actors)."""
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine="ray"))
    return tmp_path


def write_suite(folder: Path, cases: list[dict], name: str = "suite.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def farm(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def results(path: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_every_status_for_its_reason(project: Path):
    suite = write_suite(
        project,
        [
            {"id": "pass", "input": "Hello", "assertions": [{"type": "contains", "value": "expense assistant"}]},
            {"id": "fail", "input": "Hello", "assertions": [{"type": "contains", "value": "pirate"}]},
            {"id": "skip", "turns": [{"input": "Submit $100,000 equipment purchase"}]},
            {"id": "error-agent", "input": "always 500"},
            {"id": "timeout", "input": "slow 5", "timeout": "1s"},
            {"id": "skip-flag", "input": "Hello", "skip": "not today"},
        ],
    )
    out = project / "out.jsonl"
    result = farm("test", "-i", str(suite), "-o", str(out), "--config", str(project / "farm.toml"))
    assert result.exit_code == 1, result.output
    got = results(out)
    assert {k: v["status"] for k, v in got.items()} == {
        "pass": "passed",
        "fail": "failed",
        "skip": "skipped",
        "error-agent": "error",
        "timeout": "timeout",
        "skip-flag": "skipped",
    }
    assert "pirate" in got["fail"]["error"]
    assert got["skip"]["awaiting_question"] == "Please provide PO number."
    assert got["skip"]["turns"][0]["awaiting_reason"] == "content_is_question"
    assert "500" in got["error-agent"]["error"]
    assert "timeout" in got["timeout"]["error"]
    assert got["skip-flag"]["error"] == "not today"


def test_missing_input_fails_when_asked_to(project: Path):
    suite = write_suite(project, [{"id": "skip", "turns": [{"input": "Submit $100,000 equipment purchase"}]}])
    out = project / "out.jsonl"
    result = farm("test", "-i", str(suite), "-o", str(out), "--on-missing-input", "fail", "--config", str(project / "farm.toml"))
    assert result.exit_code == 1
    assert results(out)["skip"]["status"] == "failed"


def test_a_suite_with_problems_stops_before_any_call_with_farm_validates_whole_list(project: Path, scripted: JSONServer):
    """As pytest stops on a collection error: exit 2, every problem with file:line, no run folder, no call."""
    before = scripted.requests
    suite = write_suite(
        project,
        [
            {"id": "ok", "input": "Hello"},
            {"id": "typo", "input": "Hello", "assertons": [{"type": "contains", "value": "x"}]},
            {"id": "rule", "input": "Hello", "assertions": [{"type": "smells_like", "value": "x"}]},
        ],
    )
    validate = farm("validate", str(suite), "--config", str(project / "farm.toml"))
    result = farm("test", "-i", str(suite), "--config", str(project / "farm.toml"))
    assert validate.exit_code == result.exit_code == 2, result.output
    expected = [line for line in validate.output.splitlines() if line.startswith("error:")]
    assert expected[0] == f"error: {suite}:2: field 'assertons': unknown field (did you mean 'assertions'?)"
    assert len(expected) == 2 and f"{suite}:3: " in expected[1]
    assert [line for line in result.output.splitlines() if line.startswith("error:")] == expected
    assert not (project / "results").exists() and "Traceback" not in result.output
    assert scripted.requests == before


def test_broken_json_line_exits_2_naming_every_line(project: Path):
    suite = project / "broken.jsonl"
    suite.write_text('{"id": "ok", "input": "Hello"}\n{"id": "bad", \n\n// comment\nnot json\n')
    result = farm("test", "-i", str(suite), "--config", str(project / "farm.toml"))
    assert result.exit_code == 2
    assert f"{suite}:2: not valid JSON" in result.output
    assert f"{suite}:5: not valid JSON" in result.output
    assert "Traceback" not in result.output
    assert not (project / "results").exists(), "nothing may run when a line is not JSON"


def test_static_flow_with_tool_mocks_and_final_assertions(project: Path):
    case = {
        "id": "flow",
        "turns": [
            {"input": "I want to submit an expense", "assertions": [{"type": "contains", "value": "type of expense"}]},
            {"input": "Business travel, $3500", "assertions": [{"type": "tool_called", "name": {"name": "create_expense", "arguments": {"amount": 3500}}}]},
            {"input": "Yes, confirm", "assertions": [{"type": "contains", "value": "submitted"}]},
        ],
        "final_assertions": [{"type": "json_path", "path": "$.expense.status", "value": "submitted"}],
    }
    out = project / "out.jsonl"
    result = farm("test", "-i", str(write_suite(project, [case])), "-o", str(out), "--config", str(project / "farm.toml"))
    assert result.exit_code == 0, result.output
    got = results(out)["flow"]
    assert got["status"] == "passed"
    assert [t["tool_calls"][0]["name"] for t in got["turns"] if t["tool_calls"]] == ["create_expense", "submit_expense"]
    assert got["turns"][1]["steps"] == 2  # the mock was answered and the agent asked again
    assert got["final_assertions"][0]["passed"] is True


def test_429_with_retry_after_then_success(project: Path, engine: str):
    out = project / "out.jsonl"
    suite = write_suite(project, [{"id": "limited", "input": f"429 once e2e-{engine}", "assertions": [{"type": "contains", "value": "recovered"}]}])
    result = farm("test", "-i", str(suite), "-o", str(out), "--config", str(project / "farm.toml"))
    assert result.exit_code == 0, result.output
    got = results(out)["limited"]
    assert got["status"] == "passed"
    assert got["turns"][0]["duration_ms"] >= 900  # it waited for Retry-After


def test_200_cases_read_back_complete_and_consistent(project: Path, engine: str):
    cases = [
        {"id": f"c{i:03d}", "input": "Hello" if i % 4 else "What is the travel policy?",
         "assertions": [{"type": "contains", "value": "expense assistant" if i % 4 else "limit"}] + ([{"type": "contains", "value": "nope"}] if i % 10 == 0 else [])}
        for i in range(200)
    ]
    result = farm("test", "-i", str(write_suite(project, cases)), "--config", str(project / "farm.toml"), "--parallel", "50")
    assert result.exit_code == 1  # every tenth case fails on purpose
    run_dirs = list((project / "results").iterdir())
    assert len(run_dirs) == 1
    run_dir = run_dirs[0]
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert sorted(r["id"] for r in records) == sorted(c["id"] for c in cases)
    assert sum(r["status"] == "failed" for r in records) == 20
    assert all(r["worker"] for r in records), [(r["status"], r["error"]) for r in records if not r["worker"]][:3]
    workers = {r["worker"].split("@")[0] for r in records}
    if engine == "ray":
        assert len(workers) >= 2, "cases spread over the session actors"
    else:
        assert workers == {"local"}, "every conversation in this process"
    cases_table = pq.read_table(run_dir / "cases.parquet")
    turns_table = pq.read_table(run_dir / "turns.parquet")
    assertions_table = pq.read_table(run_dir / "assertions.parquet")
    assert cases_table.num_rows == 200 and turns_table.num_rows == 200
    assert assertions_table.num_rows == sum(len(c["assertions"]) for c in cases)
    run_id = records[0]["run_id"]
    for table in (cases_table, turns_table, assertions_table):
        assert set(table.column("run_id").to_pylist()) == {run_id}
    statuses = dict(zip(cases_table.column("case_id").to_pylist(), cases_table.column("status").to_pylist(), strict=True))
    assert statuses == {r["id"]: r["status"] for r in records}
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["counts"]["failed"] == 20
    assert info["engine"] == engine and info["schema_version"] == 2


def test_dry_run_prints_cases_and_writes_them(project: Path):
    null_value = {"type": "json_path", "path": "$.a", "value": None}  # the field set to null: not the field left out
    suite = write_suite(project, [{"id": "a", "input": "Hello", "assertions": [null_value]}, {"id": "b", "turns": [{"input": "x"}]}])
    out = project / "saved.jsonl"
    result = farm("test", "-i", str(suite), "--dry-run", "-o", str(out), "--config", str(project / "farm.toml"))
    assert result.exit_code == 0, result.output
    saved = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["id"] for c in saved] == ["a", "b"]
    assert saved[0]["assertions"] == [null_value]
    assert not (project / "results").exists()


def test_run_regex_and_direct_message(project: Path):
    suite = write_suite(project, [{"id": "keep-1", "input": "Hello"}, {"id": "drop-1", "input": "Hello"}])
    out = project / "out.jsonl"
    assert farm("test", "-i", str(suite), "-o", str(out), "--run", "^keep", "--config", str(project / "farm.toml")).exit_code == 0
    assert list(results(out)) == ["keep-1"]
    result = farm("test", "-i", "Hello there", "-o", str(out), "--config", str(project / "farm.toml"))
    assert result.exit_code == 0
    assert "expense assistant" in results(out)["message"]["turns"][0]["output"]


def test_unknown_agent_is_one_sentence(project: Path):
    result = farm("test", "-i", "Hello", "-n", "nobody", "--config", str(project / "farm.toml"))
    assert result.exit_code == 2
    assert "agent 'nobody' is not configured" in result.output
    assert "Traceback" not in result.output


def test_connector_from_case_options_and_from_the_command_line(project: Path):
    cases = [
        {"id": "default", "input": "which model", "assertions": [{"type": "contains", "value": "model is scripted"}]},
        {"id": "pinned", "input": "which model", "options": {"connector": "other"}, "assertions": [{"type": "contains", "value": "model is other-model"}]},
        {"id": "turn", "turns": [{"input": "which model", "options": {"connector": "other"}, "assertions": [{"type": "contains", "value": "other-model"}]}]},
    ]
    out = project / "out.jsonl"
    result = farm("test", "-i", str(write_suite(project, cases)), "-o", str(out), "--config", str(project / "farm.toml"))
    got = results(out)
    assert {k: v["status"] for k, v in got.items()} == {"default": "passed", "pinned": "passed", "turn": "passed"}
    assert result.exit_code == 0, result.output
    unknown = write_suite(project, [*cases, {"id": "unknown", "input": "which model", "options": {"connector": "nowhere"}}])
    result = farm("test", "-i", str(unknown), "-o", str(project / "not-written.jsonl"), "--config", str(project / "farm.toml"))
    assert result.exit_code == 2 and f"{unknown}:4: field 'options.connector': connector 'nowhere' is not configured" in result.output
    assert not (project / "not-written.jsonl").exists()
    suite = write_suite(project, [{"id": "c", "input": "which model", "assertions": [{"type": "contains", "value": "other-model"}]}])
    assert farm("test", "-i", str(suite), "-o", str(out), "-c", "other", "--config", str(project / "farm.toml")).exit_code == 0


def test_fail_fast_stops_dispatch_and_keeps_what_finished(project: Path):
    cases = [{"id": "bad", "input": "Hello", "assertions": [{"type": "contains", "value": "nope"}]}]
    cases += [{"id": f"later-{i}", "input": "slow 0.3"} for i in range(30)]
    out = project / "out.jsonl"
    result = farm("test", "-i", str(write_suite(project, cases)), "-o", str(out), "--parallel", "2", "--fail-fast", "--config", str(project / "farm.toml"))
    assert result.exit_code == 1
    got = results(out)
    assert got["bad"]["status"] == "failed"
    assert 1 < len(got) < 10, f"{len(got)} results: dispatch went on after the failure"
    said = f"Gate: failed: the run stopped early at its first failure (--fail-fast): {31 - len(got)} case runs not run; "
    assert result.output.strip().splitlines()[-1].startswith(said), result.output


def test_fail_fast_starts_none_of_the_calls_queued_on_the_actors(project: Path):
    """With --parallel 8 each of the 2 actors runs 4 conversations and holds 4 more calls
    queued. Two cases fail after 0.5 s while the others take 2 s: once the first failure is
    in, none of the queued calls may start, but the one that takes a failed case's slot at
    that very moment. (An async actor starts its calls in no set order: the failing cases
    may run in the first wave or in the second, so the check is on when cases started.)"""
    bad = {"input": "slow 0.5", "assertions": [{"type": "contains", "value": "nope"}]}
    cases = [{"id": "bad-a", **bad}, {"id": "bad-b", **bad}]
    cases += [{"id": f"later-{i}", "input": "slow 2"} for i in range(40)]
    out = project / "out.jsonl"
    result = farm("test", "-i", str(write_suite(project, cases)), "-o", str(out), "--parallel", "8", "--fail-fast", "--config", str(project / "farm.toml"))
    assert result.exit_code == 1
    got = results(out)
    failed = [r for r in got.values() if r["status"] == "failed"]
    assert failed and {r["id"] for r in failed} <= {"bad-a", "bad-b"}
    ends = [r["started_at"] + r["duration_ms"] / 1000 for r in failed]
    # late: started after the first failure, and not in the slot a failed case freed as it ended
    late = sorted(r["id"] for r in got.values() if r["started_at"] > min(ends) + 0.3 and not any(0 <= r["started_at"] - end < 0.3 for end in ends))
    assert late == [], f"queued calls started after the first failure: {late}"
    # at most two waves of 8 and the calls that took the failed cases' slots (without the stop: 42)
    assert 1 < len(got) <= 18, f"{len(got)} results: queued calls ran after the failure"


def test_waits_for_rate_limit_permits_are_not_agent_time(tmp_path: Path, scripted: JSONServer, engine: str):
    """At rpm 60 the third case waits ~2 s for its permit: longer than its turn and case
    timeouts, but not agent time, so it passes its latency assertion and records the wait.
    (A case whose session actor starts late waits less: the pacing is checked by the grants.)"""
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine=engine, rpm=60))
    fast = {"input": "slow 0.05", "assertions": [{"type": "latency", "value": 900}]}
    suite = write_suite(tmp_path, [{"id": f"c{i}", **fast} for i in range(3)])
    out = tmp_path / "out.jsonl"
    result = farm("test", "-i", str(suite), "-o", str(out), "--parallel", "3", "--turn-timeout", "1s", "--timeout", "1500ms", "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 0, result.output
    got = results(out).values()
    turns = [r["turns"][0] for r in got]
    assert all(t["duration_ms"] < 900 for t in turns), turns
    granted = sorted(r["started_at"] + r["turns"][0]["queued_ms"] / 1000 for r in got)
    assert granted[-1] - granted[0] >= 1.8, granted  # a permit a second
    most = max(t["queued_ms"] for t in turns)
    assert most >= 1000, "a case waited past its turn timeout for its permit"
    [turns_parquet] = (tmp_path / "results").glob("*/turns.parquet")
    assert max(pq.read_table(turns_parquet).column("queued_ms").to_pylist()) == most


def test_a_small_suite_at_a_generous_rpm_does_not_wait_a_second_for_its_last_case(tmp_path: Path, scripted: JSONServer, engine: str):
    """rpm 500, burst 8: ten cases, eight at once, then one every 122 ms (not the tenth after 1 s).
    One session actor on Ray: the ten start together, whenever it and the limiter are up."""
    toml = farm_toml(scripted.url, engine=engine, rpm=500, burst=8).replace("[farm]\n", "[farm]\nactors = 1\n", 1)
    (tmp_path / "farm.toml").write_text(toml)
    suite = write_suite(tmp_path, [{"id": f"c{i}", "input": "Hello"} for i in range(10)])
    out = tmp_path / "out.jsonl"
    result = farm("test", "-i", str(suite), "-o", str(out), "--parallel", "10", "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 0, result.output
    granted = sorted(r["started_at"] + r["turns"][0]["queued_ms"] / 1000 for r in results(out).values())
    assert granted[-1] - granted[0] > 0.2, granted  # the last two are paced
    # and not a second later (a 1-second window held them ~1 s); on Ray each grant is a round trip
    # to the limiter actor, slower on a loaded machine
    assert granted[-1] - granted[0] < (0.6 if engine == "local" else 0.9), granted


def test_a_case_stopped_at_its_first_turn_is_headed_so(project: Path):
    suite = write_suite(project, [{"id": "three", "turns": [{"input": "always 500"}, {"input": "Hello"}, {"input": "Hello"}]}])
    result = farm("test", "-i", str(suite), "--config", str(project / "farm.toml"))
    assert result.exit_code == 1, result.output
    assert "► [three] (stopped at turn 1)" in result.output


def test_a_connector_timeout_that_spends_its_retries_is_a_timeout(tmp_path: Path, scripted: JSONServer, engine: str):
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine=engine, timeout="200ms"))
    suite = write_suite(tmp_path, [{"id": "stuck", "input": "slow 2"}])
    out = tmp_path / "out.jsonl"
    result = farm("test", "-i", str(suite), "-o", str(out), "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 1
    got = results(out)["stuck"]
    assert got["status"] == "timeout", got["error"]
    assert "no answer came within the 0.2 s timeout" in got["error"] and "3 requests" in got["error"]


def test_a_turn_a_timeout_cut_says_so_and_never_reads_passed_or_completed(tmp_path: Path, scripted: JSONServer, engine: str):
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine=engine))
    cases = [
        {
            "id": "case-cut",
            "timeout": "500ms",
            "turns": [{"input": "slow 3", "assertions": [{"type": "not_contains", "value": "error"}]}],
        },
        {"id": "turn-cut", "turns": [{"input": "slow 3", "timeout": "500ms"}]},
    ]
    out = tmp_path / "out.jsonl"
    result = farm("test", "-i", str(write_suite(tmp_path, cases)), "-o", str(out), "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 1, result.output
    got = results(out)
    for case_id, error in (
        ("case-cut", "the agent did not answer before the case's timeout (500ms) ran out"),
        ("turn-cut", "the agent did not answer within the turn timeout (500ms)"),
    ):
        assert got[case_id]["status"] == "timeout", got[case_id]
        (turn,) = got[case_id]["turns"]
        assert (turn["error"], turn["awaiting_reason"], turn["assertions"]) == (error, "no_reply", [])
    assert 'Turn 1: "slow 3" → TIMEOUT' in result.output and "→ PASSED" not in result.output, result.output


@pytest.mark.parametrize("quiet", [False, True])
def test_a_field_the_run_ignores_is_said_before_it_runs_as_validate_says_it(tmp_path: Path, scripted: JSONServer, quiet: bool):
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url, engine="local"))
    suite = write_suite(tmp_path, [{"id": "a", "input": "Hello", "expected": "NOPE", "assertions": [{"type": "contains", "value": "Hello"}]}])
    said = f"{suite}:1: field 'expected': ignored, because the case has assertions (they win); keep one of the two"
    result = farm("test", "-i", str(suite), *(["-q"] if quiet else []), "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 0, result.output
    assert f"warning: {said}\n" in result.output
    assert f"warning: {said}\n" in farm("validate", str(suite), "--config", str(tmp_path / "farm.toml")).output
