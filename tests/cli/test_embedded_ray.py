"""``farm test`` on its own embedded Ray, as on a laptop: it starts Ray, runs, and leaves nothing behind.

These start a Ray of their own in a child process (the session's Ray is not
joined), so each costs a few seconds. Every process the child starts inherits
a marker in its environment; after the child exits none may be left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from farm.demo.server import JSONServer
from tests.scripted import ScriptedAgent, farm_toml

pytestmark = pytest.mark.ray  # starts Ray of its own

MARKER = "FARM_TEST_EMBEDDED_MARKER"


@pytest.fixture(scope="module")
def scripted():
    with JSONServer(ScriptedAgent()) as server:
        yield server


def embedded_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """A child environment for a private embedded Ray, marked so that its processes can be found."""
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    ray_tmp = Path("/tmp") / f"farm-emb-{marker[:8]}"  # short: Ray's socket paths must fit in 107 bytes
    env.update({MARKER: marker, "RAY_TMPDIR": str(ray_tmp), "HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled"})
    return env, marker


def marked_processes(marker: str) -> list[str]:
    """Processes whose environment carries ``marker``: what the child started and left running."""
    found = []
    needle = f"{MARKER}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name}: {command[:120]}")
        except OSError:  # gone, or not ours to read
            continue
    return found


def wait_until_gone(marker: str, seconds: float = 5.0) -> list[str]:
    deadline = time.monotonic() + seconds
    left = marked_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(marker)
    return left


def write_project(tmp_path: Path, url: str, cases: list[dict]) -> Path:
    (tmp_path / "farm.toml").write_text(farm_toml(url, engine="ray"))
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return suite


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds leftover processes through /proc (Linux)")
def test_sigint_stops_an_embedded_run_quickly_then_resume_finishes_it_and_stops_every_process(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.5"} for i in range(10)])
    env, marker = embedded_env(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "test", "-i", str(suite), "--parallel", "2", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        lines = 0
        while time.monotonic() < deadline and lines < 2:
            time.sleep(0.1)
            files = list((tmp_path / "results").glob("*/results.jsonl"))
            lines = len(files[0].read_text().splitlines()) if files else 0
        assert lines >= 2, "the run never wrote two results"
        proc.send_signal(signal.SIGINT)
        interrupted = time.monotonic()
        output, _ = proc.communicate(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert took < 10, f"took {took:.1f} s to stop"
    match = re.search(r"Resume with: farm test --resume (\S+)", output)
    assert match, output
    assert wait_until_gone(marker) == [], "processes of the embedded Ray outlived the interrupted run"

    run_dir = Path(match.group(1))
    resumed = subprocess.run(
        [sys.executable, "-m", "cli", "test", "--resume", str(run_dir), "--parallel", "6", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(10)), "exactly one result per case"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["counts"]["passed"] == 10 and info["ray"]["address"] == "local"
    timings = info["timings"]
    assert 0 < timings["engine_ready_s"] <= timings["first_result_s"] <= timings["last_result_s"] <= timings["closed_s"]
    assert "Traceback" not in resumed.stderr and "Raylet" not in resumed.stderr + resumed.stdout
    assert wait_until_gone(marker) == [], "processes of the embedded Ray outlived the resumed run"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds leftover processes through /proc (Linux)")
def test_kill_9_of_the_farm_leaves_no_ray_process_and_resume_completes_both_tables(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.3"} for i in range(12)])
    env, marker = embedded_env(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "test", "-i", str(suite), "--parallel", "2", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        lines = 0
        while time.monotonic() < deadline and lines < 2:
            time.sleep(0.1)
            files = list((tmp_path / "results").glob("*/results.jsonl"))
            lines = len(files[0].read_text().splitlines()) if files else 0
        assert lines >= 2, "the run never wrote two results"
    finally:
        proc.kill()
        proc.wait()
    assert wait_until_gone(marker, 10.0) == [], "processes of the embedded Ray outlived a kill -9 of the farm"

    [run_dir] = (tmp_path / "results").iterdir()
    resumed = subprocess.run(
        [sys.executable, "-m", "cli", "test", "--resume", str(run_dir), "--engine", "local", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = sorted(json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines())
    assert ids == sorted(f"c{i}" for i in range(12)), "exactly one result per case"
    assert sorted(pq.read_table(run_dir / "cases.parquet").column("case_id").to_pylist()) == ids
    assert json.loads((run_dir / "run.json").read_text())["counts"]["passed"] == 12


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds leftover processes through /proc (Linux)")
def test_a_dead_embedded_ray_stops_the_run_with_one_sentence_and_resume_runs_the_rest(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.3"} for i in range(16)])
    env, marker = embedded_env(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "test", "-i", str(suite), "--parallel", "2", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        lines = 0
        while time.monotonic() < deadline and lines < 2:
            time.sleep(0.1)
            files = list((tmp_path / "results").glob("*/results.jsonl"))
            lines = len(files[0].read_text().splitlines()) if files else 0
        assert lines >= 2, "the run never wrote two results"
        vital = ("DashboardAgent", "RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent/main.py")
        agents = [line.split(":")[0] for line in marked_processes(marker) if any(name in line for name in vital)]
        assert agents, marked_processes(marker)
        os.kill(int(agents[0]), signal.SIGKILL)  # a vital agent of the node: the node dies
        output, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, output
    assert "the Ray node running this farm stopped" in output and "resume with: farm test --resume" in output, output
    assert "Traceback" not in output
    [run_dir] = (tmp_path / "results").iterdir()
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert all(r["status"] == "passed" for r in records), "no case is blamed for the lost node"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "stopped"
    assert wait_until_gone(marker, 10.0) == []

    resumed = subprocess.run(
        [sys.executable, "-m", "cli", "test", "--resume", str(run_dir), "--engine", "local", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = sorted(json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines())
    assert ids == sorted(f"c{i}" for i in range(16))
