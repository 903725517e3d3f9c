"""Agent-driven testing end to end: simulator and validator pools, generators, scripts, hooks.

The agent under test and the scripted role models run behind real HTTP servers on
127.0.0.1; the farm runs on the session's real Ray.
"""

from __future__ import annotations

import json
import socket
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response
from tests.scripted import RoleModels, ScriptedAgent, farm_toml, roles_toml

SIM = {"use": "sim", "options": {"metadata": {"goal": "file a $3500 travel expense"}}}
CHECKPOINTS = [
    {"id": "ask_type", "assertion": {"type": "contains", "value": "type"}},
    {"id": "create", "after": ["ask_type"], "assertion": {"type": "tool_called", "name": "create_expense"}},
    {"id": "done", "after": ["create"], "assertion": {"type": "contains", "value": "submitted"}},
]


@pytest.fixture(scope="module")
def servers():
    models = RoleModels()
    with JSONServer(ScriptedAgent()) as agent, JSONServer(models) as roles:
        yield agent, roles, models


@pytest.fixture
def project(tmp_path: Path, servers, engine: str) -> Path:
    """A project on ``engine``: each test runs on both."""
    agent, roles, _ = servers
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine) + roles_toml(roles.url))
    return tmp_path


@pytest.fixture
def ray_project(tmp_path: Path, servers, ray_session) -> Path:
    """A project for what only the ray engine has (role pools on actors)."""
    agent, roles, _ = servers
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine="ray") + roles_toml(roles.url))
    return tmp_path


def run(project: Path, cases: list[dict] | None, *args: str, input: str | None = None):
    out = project / "out.jsonl"
    out.unlink(missing_ok=True)
    if cases is not None:
        suite = project / "suite.jsonl"
        suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
        args = ("-i", str(suite), *args)
    result = CliRunner().invoke(app, ["test", *args, "-o", str(out), "--config", str(project / "farm.toml")], input=input, catch_exceptions=False)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, {r["id"] if r["run_index"] == 0 else f"{r['id']}#{r['run_index']}": r for r in records}


def test_dynamic_cases_on_the_simulator_pool(project: Path):
    cases = [
        {"id": "dyn", "simulator": SIM, "checkpoints": CHECKPOINTS, "max_turns": 6},
        {"id": "dyn-fenced", "simulator": {**SIM, "use": "sim-fenced"}, "checkpoints": CHECKPOINTS, "max_turns": 6},
        {"id": "dyn-default", "simulator": {}, "checkpoints": CHECKPOINTS[:1]},
    ]
    result, got = run(project, cases, "--simulator", "sim")
    assert result.exit_code == 0, result.output
    assert got["dyn"]["status"] == "passed"
    assert [c["reached_at_turn"] for c in got["dyn"]["checkpoints"]] == [1, 2, 3]
    assert [t["input_source"] for t in got["dyn"]["turns"]] == ["simulated"] * 3
    assert got["dyn-fenced"]["status"] == "passed"
    assert got["dyn-default"]["status"] == "passed"  # --simulator supplied the use


def test_a_dead_simulator_fails_the_build(project: Path):
    """A simulator that answers prose where JSON is asked, or whose endpoint is down, is an error
    of the simulator (exit 1), never a skip that lets a run that tested nothing exit 0."""
    import pyarrow.parquet as pq

    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    toml = project / "farm.toml"
    toml.write_text(
        toml.read_text()
        + f'\n[connectors.down]\nbase_url = "http://127.0.0.1:{port}/v1"\nmodel = "m"\nmax_retries = 0\n'
        + '\n[agents."sim-down"]\nkind = "simulator"\nconnector = "down"\n'
    )
    for use in ("sim-broken", "sim-down"):
        result, got = run(project, [{"id": "dyn", "simulator": {**SIM, "use": use}, "checkpoints": CHECKPOINTS}])
        assert result.exit_code == 1, result.output
        assert (got["dyn"]["status"], got["dyn"]["error_role"]) == ("error", "simulator"), got["dyn"]
        assert got["dyn"]["error"].startswith("simulator error: the simulator ")
        assert "SKIPPED" not in result.output and "ERROR" in result.output
    tables = sorted((project / "results").glob("*/cases.parquet"))
    assert [pq.read_table(t).column("error_role").to_pylist() for t in tables] == [["simulator"], ["simulator"]]


def test_static_case_continues_with_the_simulator(project: Path):
    case = {"id": "cont", "turns": [{"input": "I want to submit an expense"}], "simulator": SIM, "max_turns": 5}
    result, got = run(project, [case])
    assert result.exit_code == 0, result.output
    assert [t["input_source"] for t in got["cont"]["turns"]] == ["static", "simulated", "simulated"]
    assert "submitted" in got["cont"]["turns"][-1]["output"]


def test_validator_pass_and_fail(project: Path):
    turns = [{"input": "Taxi, $45"}, {"input": "yes"}]
    cases = [
        {"id": "judged-pass", "turns": [turns[0], {**turns[1], "assertions": [{"type": "agent", "use": "agents:val", "options": {"metadata": {"criteria": "submitted"}}}]}]},
        {"id": "judged-fail", "turns": [turns[0], {**turns[1], "assertions": [{"type": "agent", "use": "agents:val", "options": {"metadata": {"criteria": "refunded"}}}]}]},
    ]
    result, got = run(project, cases)
    assert result.exit_code == 1
    passed = got["judged-pass"]["turns"][1]["assertions"][0]
    assert got["judged-pass"]["status"] == "passed" and passed["score"] == 1.0 and passed["reason"] == "looked for 'submitted'"
    failed = got["judged-fail"]["turns"][1]["assertions"][0]
    assert got["judged-fail"]["status"] == "failed" and failed["suggestions"] == ["say refunded"]


class HeldValidator:
    """The role models, but ``val-slow`` answers only once ``results`` holds ``quick`` results (or
    after ``patience`` seconds, for a run that held them up): it is still pending while they end."""

    def __init__(self, results: Path, quick: int, patience: float = 60.0):
        self.models = RoleModels()
        self.results, self.quick, self.patience = results, quick, patience
        self.written_when_answered: list[int] = []

    def written(self) -> int:
        return len(self.results.read_text().splitlines()) if self.results.exists() else 0

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        if body.get("model") != "val-slow":
            return self.models(path, body, headers)
        deadline = time.monotonic() + self.patience
        while self.written() < self.quick and time.monotonic() < deadline:
            time.sleep(0.02)
        self.written_when_answered.append(self.written())
        return self.models(path, {**body, "model": "val"}, headers)  # the same verdict, now


def test_a_slow_validator_does_not_slow_other_conversations(tmp_path: Path, servers, engine: str):
    """Conversations go on while a validator call is pending: the 20 quick ones are written
    before the judge's validator answers, which waits for them."""
    agent = servers[0]
    held = HeldValidator(tmp_path / "out.jsonl", quick=20)
    judged = {"id": "slow-judge", "input": "Hello", "assertions": [{"type": "agent", "use": "agents:val-slow", "options": {"metadata": {"criteria": "expense"}}}]}
    quick = [{"id": f"quick-{i}", "turns": [{"input": "I want to submit an expense"}, {"input": "Travel, $10"}, {"input": "yes"}]} for i in range(20)]
    with JSONServer(held) as roles:
        (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine) + roles_toml(roles.url))
        result, got = run(tmp_path, [judged] + quick, "--parallel", "8")
    assert result.exit_code == 0, result.output
    assert held.written_when_answered == [20], "the validator's answer came before the other conversations had ended"
    assert got["slow-judge"]["status"] == "passed" and all(got[f"quick-{i}"]["status"] == "passed" for i in range(20))
    assert list(got)[-1] == "slow-judge"  # it ended last, as it waited


def test_generated_cases_from_an_agent(project: Path, servers):
    result, got = run(project, None, "-i", "agents:gen?count=3&focus=edge-cases")
    assert result.exit_code == 0, result.output
    assert sorted(got) == ["gen-0", "gen-1", "gen-2"]
    assert all(r["status"] == "passed" for r in got.values())


def test_generated_cases_dry_run_saves_a_suite(project: Path):
    out = project / "generated.jsonl"
    result = CliRunner().invoke(app, ["test", "-i", "agents:gen?count=2", "--dry-run", "-o", str(out), "--config", str(project / "farm.toml")])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["gen-0", "gen-1"]


def scripts(project: Path, name: str, code: str) -> None:
    folder = project / "scripts"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(textwrap.dedent(code))


def test_script_generator_script_assertion_and_hooks(project: Path):
    scripts(project, "tools", """
        def generate(meta):
            return [{"id": f"s{i}", "input": f"Hello {i}", "before": "scripts:tools.setup",
                     "assertions": [{"type": "script", "use": "scripts:tools.check", "options": {"metadata": {"word": meta["word"]}}}]}
                    for i in range(meta["count"])]

        def check(reply, input, options):
            word = options["metadata"]["word"]
            return {"passed": word in reply, "reason": f"looked for {word}", "score": 1.0}

        def setup(payload):
            return {"prepared": payload["case"]["id"]}

        def broken(payload):
            raise RuntimeError("database is down")
    """)
    result, got = run(project, None, "-i", "scripts:tools.generate?count=2&word=expense")
    assert result.exit_code == 0, result.output
    assert sorted(got) == ["s0", "s1"]
    assert got["s0"]["turns"][0]["assertions"][0]["reason"] == "looked for expense"

    result, got = run(project, [{"id": "hooked", "input": "Hello", "before": "scripts:tools.broken"}, {"id": "fine", "input": "Hello"}])
    assert result.exit_code == 1
    assert got["hooked"]["status"] == "error" and "database is down" in got["hooked"]["error"]
    assert got["fine"]["status"] == "passed"

    result, got = run(project, [{"id": "x", "input": "Hello"}], "--before", "scripts:tools.broken")
    assert result.exit_code == 2 and "global before hook" in result.output
    assert got == {}


def test_script_tests_module(project: Path):
    scripts(project, "checks", """
        def test_greeting(t, ctx):
            '''The agent greets'''
            reply = ctx.agent("target").send("Hello")
            t.assert_.contains(reply, "expense assistant")
            t.assert_(reply.content, "no reply")
            t.log("greeted")

        def test_judged(t, ctx):
            reply = ctx.agent().send("Hello")
            verdict = t.assert_.agent(reply, "val", {"metadata": {"criteria": "pirate"}})
            t.assert_.equal(verdict["passed"], False)
            t.assert_("pirate" in reply.content, "no pirate talk")

        async def test_async_skip(t, ctx):
            reply = await ctx.agent().asend("Hello")
            t.skip("not ready: " + reply.content[:5])
    """)
    result, got = run(project, None, "-i", "scripts.checks")
    assert result.exit_code == 1, result.output  # test_judged's validator fails
    assert got["checks.test_greeting"]["status"] == "passed"
    assert got["checks.test_greeting"]["logs"] == ["greeted"]
    assert got["checks.test_greeting"]["name"] == "The agent greets"
    assert got["checks.test_judged"]["status"] == "failed"
    judged = got["checks.test_judged"]["final_assertions"]
    assert judged[0]["reason"] == "looked for 'pirate'" and not judged[0]["error"]  # the validator judged it
    assert judged[1]["passed"] is True  # t.assert_.equal(verdict["passed"], False)
    assert judged[2]["passed"] is False and judged[2]["message"] == "no pirate talk"  # t.assert_(condition, message)
    assert [a["passed"] for a in got["checks.test_greeting"]["final_assertions"]] == [True, True]
    assert got["checks.test_async_skip"]["status"] == "skipped" and got["checks.test_async_skip"]["error"] == "not ready: Hello"


def test_runs_n_records_run_index_and_stability(project: Path):
    result, got = run(project, [{"id": "r", "input": "Hello"}, {"id": "f", "input": "Hello", "assertions": [{"type": "contains", "value": "nope"}]}], "--runs", "3")
    assert result.exit_code == 1
    assert sorted(r["run_index"] for r in got.values() if r["id"] == "r") == [0, 1, 2]
    assert "Stability" in result.output
    assert "consistently_failing" in result.output and "highly_unstable" not in result.output  # f never passes: failing, not flaky


def test_a_rerun_sends_no_role_request_the_first_run_made(project: Path, servers):
    """The role cache: the second run of a dynamic case asks neither the simulator nor the validator."""
    models = servers[2]
    judged = {"type": "agent", "use": "agents:val", "value": "submitted"}
    cases = [{"id": "dyn-cached", "simulator": SIM, "checkpoints": CHECKPOINTS, "final_assertions": [judged], "max_turns": 6}]
    before = dict(models.calls)
    result, got = run(project, cases)
    assert result.exit_code == 0, result.output
    first = {m: models.calls[m] - before.get(m, 0) for m in ("sim", "val")}
    assert first["sim"] >= 3 and first["val"] == 1
    row = got["dyn-cached"]
    assert row["role_calls"] == first["sim"] + first["val"] and row["cache_hits"] == 0
    sent = dict(models.calls)
    result, got = run(project, cases)
    assert result.exit_code == 0, result.output
    assert dict(models.calls) == sent  # no role request again
    assert got["dyn-cached"]["status"] == "passed"
    assert got["dyn-cached"]["cache_hits"] == got["dyn-cached"]["role_calls"] == row["role_calls"]
    assert f"Role calls: {row['role_calls']} ({row['role_calls']} from the cache)" in result.output
    result, got = run(project, cases, "--no-cache", "--json")
    assert models.calls["sim"] - sent["sim"] == first["sim"] and got["dyn-cached"]["cache_hits"] == 0
    summary = [json.loads(line) for line in result.stdout.splitlines() if '"summary"' in line][-1]
    assert (summary["role_calls"], summary["cache_hits"]) == (row["role_calls"], 0)


def test_reporter_writes_report_md(project: Path):
    result, got = run(project, [{"id": "ok", "input": "Hello"}, {"id": "bad", "input": "Hello", "assertions": [{"type": "contains", "value": "nope"}]}], "-r", "rep")
    assert result.exit_code == 1
    run_dir = next(p for p in (project / "results").iterdir() if not p.name.startswith("."))  # .cache: the role cache
    assert (run_dir / "report.md").read_text() == "# Run report\n\n1 failed: bad"


def test_a_validator_pool_actor_that_dies_is_restarted_and_the_run_goes_on(ray_project: Path):
    import threading

    import ray

    killed = []

    def kill_validator_soon():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            # in this test's namespace; every one, as the pool actor of an earlier run may serve this one
            names = [name for name in ray.util.list_named_actors() if name.startswith("farm-val-")]
            if names:
                time.sleep(1.0)
                for name in names:
                    ray.kill(ray.get_actor(name), no_restart=False)
                killed.extend(names)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_validator_soon)
    killer.start()
    cases = [{"id": f"j{i}", "input": "Hello", "assertions": [{"type": "agent", "use": "agents:val-slow", "options": {"metadata": {"criteria": "expense"}}}]} for i in range(4)]
    result, got = run(ray_project, cases, "--parallel", "4")
    killer.join()
    assert killed, "the validator pool actor was killed mid-run"
    assert result.exit_code == 0, result.output
    assert all(r["status"] == "passed" for r in got.values())


def test_script_tests_run_with_no_agent_configured(tmp_path: Path, demo_server, monkeypatch):
    """Script tests call agents themselves (``ctx.agent``): a farm.toml without a default agent runs them."""
    (tmp_path / "farm.toml").write_text(
        f'[connectors.demo]\nbase_url = "{demo_server.url}/v1"\nmodel = "demo"\n\n[agents.bot]\nkind = "openai"\nconnector = "demo"\n'
    )
    (tmp_path / "scripts" / "tests").mkdir(parents=True)
    (tmp_path / "scripts" / "tests" / "hello.py").write_text(
        "def test_hello(t, ctx):\n    t.assert_.contains(ctx.agent('bot').send('Hello'), 'expense')\n"
    )
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["test", "-i", "scripts.tests.hello"])
    assert result.exit_code == 0, result.output
    (jsonl,) = (tmp_path / "farm-results").glob("*/results.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in rows] == [("tests.hello.test_hello", "passed")]
