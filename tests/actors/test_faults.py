"""Faults on the real local Ray: a session actor killed mid-run, a case that keeps killing
its worker, and an interrupted run resumed with nothing lost and nothing repeated."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from farm.actors.driver import run_plan

from farm.config import FarmConfig, load_config
from farm.conversation.settings import RunSettings
from farm.engines import RunPlan
from farm.suite.loader import parse_cases
from tests.scripted import farm_toml


def suicidal_agent(messages, options):
    """A python agent that kills its own process (the session actor) when asked to."""
    text = messages[-1]["content"]
    if text.startswith("die always"):
        os._exit(1)
    if text.startswith("die once "):
        marker = Path(text.split(" ", 2)[2])
        if not marker.exists():
            marker.write_text("died")
            os._exit(1)
    if text.startswith("sleep "):
        time.sleep(float(text.split()[1]))
    return "alive"


#: The agent as it is, and declaring resources (its session actors then carry them); half a CPU
#: each, so that the session's two hold both actors beside the plain ones of other test workers.
DECLARED = ["", "resources = { num_cpus = 0.5 }\nconcurrency = 5\n"]


def python_config(tmp_path: Path, resources: str = "") -> FarmConfig:
    (tmp_path / "farm.toml").write_text(
        '[agents.target]\nkind = "python"\nentry = "tests.actors.test_faults:suicidal_agent"\n' + resources
    )
    return load_config(tmp_path / "farm.toml")


def plan_for(config: FarmConfig, cases: list[dict], **kw) -> RunPlan:
    loaded = parse_cases([(f"t:{i}", c) for i, c in enumerate(cases)])
    return RunPlan(config=config, cases=loaded, settings=RunSettings(agent_id="target", run_id="faults"), **{"parallel": 64, **kw})


@pytest.mark.parametrize("resources", DECLARED, ids=["plain", "declared"])
def test_a_killed_session_actor_loses_no_conversation(tmp_path, ray_session, resources):
    cases = [{"id": f"c{i}", "input": "sleep 0.4"} for i in range(30)]
    results = []
    killed = []

    def on_result(result):
        results.append(result)
        if len(results) == 4 and not killed:
            pid = int(result.worker.rsplit(":", 1)[1])
            os.kill(pid, signal.SIGKILL)  # the actor process we started, by its pid
            killed.append(pid)

    run_plan(plan_for(python_config(tmp_path, resources), cases, parallel=10, actors=2), on_result)
    assert killed
    ids = [r.id for r in results]
    assert sorted(ids) == sorted(c["id"] for c in cases), "every case reported exactly once"
    assert all(r.status == "passed" for r in results), [(r.id, r.status, r.error) for r in results if r.status != "passed"]
    assert any(r.attempt == 2 for r in results), ("the killed actor's conversations ran again", killed, sorted({(r.worker, r.attempt) for r in results}))


@pytest.mark.parametrize("resources", DECLARED, ids=["plain", "declared"])
def test_a_case_that_keeps_killing_its_worker_is_stopped(tmp_path, ray_session, resources):
    results = {}
    cases = [{"id": "poison", "input": "die always"}]
    run_plan(plan_for(python_config(tmp_path, resources), cases, parallel=1, actors=2, max_attempts=3), lambda r: results.setdefault(r.id, r))
    assert results["poison"].status == "error"
    assert "died 3 time(s)" in results["poison"].error
    assert results["poison"].attempt == 3


def test_a_case_that_killed_its_worker_once_passes_on_attempt_2(tmp_path, ray_session):
    marker = tmp_path / "marker"
    results = {}
    cases = [{"id": "once", "input": f"die once {marker}"}, {"id": "fine", "input": "sleep 0.1"}]
    run_plan(plan_for(python_config(tmp_path), cases, parallel=1, actors=2), lambda r: results.setdefault(r.id, r))
    assert results["once"].status == "passed" and results["once"].attempt == 2
    assert results["fine"].status == "passed" and results["fine"].attempt == 1


def test_sigint_then_resume_gives_exactly_one_result_per_case(tmp_path, ray_session, demo_server):
    cases = 20  # at 2 at once, 0.4 s each: seconds of work left when the interrupt lands
    from farm.demo.server import JSONServer
    from tests.scripted import ScriptedAgent  # answers "slow <seconds>" after that long

    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="ray"))
        suite = tmp_path / "suite.jsonl"
        suite.write_text("".join(json.dumps({"id": f"c{i}", "input": "slow 0.4"}) + "\n" for i in range(cases)))
        address = ray_session.get_runtime_context().gcs_address
        cmd = [sys.executable, "-m", "farm.cli", "test", "-i", str(suite), "--parallel", "2", "--address", address, "--config", str(tmp_path / "farm.toml")]
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        results_files: list[Path] = []
        while time.monotonic() < deadline:
            results_files = list((tmp_path / "results").glob("*/results.jsonl"))
            if results_files and len(results_files[0].read_text().splitlines()) >= 3:
                break
            time.sleep(0.1)
        assert results_files, "the run never wrote a result"
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130, output
        match = re.search(r"Resume with: farm test --resume (\S+)", output)
        assert match, output
        run_dir = Path(match.group(1))
        first = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
        assert 3 <= len(first) < cases
        assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"

        resumed = subprocess.run(
            [sys.executable, "-m", "farm.cli", "test", "--resume", str(run_dir), "--parallel", "6", "--address", address, "--config", str(tmp_path / "farm.toml")],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(cases)), "exactly one result per case"
    import pyarrow.parquet as pq

    assert sorted(pq.read_table(run_dir / "cases.parquet").column("case_id").to_pylist()) == sorted(ids)
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_sigterm_stops_like_ctrl_c(tmp_path, ray_session, signum):
    from farm.demo.server import JSONServer
    from tests.scripted import ScriptedAgent

    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="ray"))
        suite = tmp_path / "suite.jsonl"
        suite.write_text("".join(json.dumps({"id": f"c{i}", "input": "slow 2"}) + "\n" for i in range(6)))
        address = ray_session.get_runtime_context().gcs_address
        proc = subprocess.Popen(
            [sys.executable, "-m", "farm.cli", "test", "-i", str(suite), "--parallel", "1", "--address", address, "--config", str(tmp_path / "farm.toml")],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / "results").glob("*/results.jsonl")):
            time.sleep(0.1)
        time.sleep(2.5)
        started = time.monotonic()
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=30)
        assert time.monotonic() - started < 10, "it exits within a few seconds"
        assert proc.returncode == 130, output
        assert "Resume with" in output


def test_rays_messages_go_to_the_run_folder_not_the_console(tmp_path, ray_session):
    from farm.cli.app import app
    from typer.testing import CliRunner

    python_config(tmp_path)
    with open(tmp_path / "farm.toml", "a") as toml:
        toml.write('\n[farm]\ndefault_agent = "target"\nresults_dir = "results"\nengine = "ray"\n')
    suite = tmp_path / "suite.jsonl"
    suite.write_text(json.dumps({"id": "poison", "input": "die always"}) + "\n" + json.dumps({"id": "fine", "input": "sleep 0.1"}) + "\n")
    result = CliRunner().invoke(app, ["test", "-i", str(suite), "--config", str(tmp_path / "farm.toml")], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    [log] = (tmp_path / "results").glob("*/ray.log")
    assert "A worker died" in log.read_text()
    assert "A worker died" not in result.output and "(raylet)" not in result.output
