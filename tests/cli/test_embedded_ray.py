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

pytestmark = [
    pytest.mark.ray,  # starts Ray of its own
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds leftover processes through /proc (Linux)"),
]

MARKER = "FARM_TEST_EMBEDDED_MARKER"


@pytest.fixture(scope="module")
def scripted():
    with JSONServer(ScriptedAgent()) as server:
        yield server


def embedded_env(tmp_path: Path) -> tuple[dict[str, str], str]:
    """A child environment for a private embedded Ray, marked so that its processes can be found:
    Ray's settings as a user has them (token auth on), an empty home folder of its own."""
    marker = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    ray_tmp = Path("/tmp") / f"farm-emb-{marker[:8]}"  # short: Ray's socket paths must fit in 107 bytes
    home = tmp_path / "home"
    home.mkdir()
    env.update({MARKER: marker, "RAY_TMPDIR": str(ray_tmp), "HOME": str(home)})
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


def _stat(pid: int) -> tuple[int, bytes]:
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return int(fields[1]), fields[19]  # parent pid, start time


def descendants(root: int) -> dict[int, tuple[bytes, str]]:
    """Every process below ``root`` now: pid -> (start time, command). An agent of Ray that renamed
    itself may have overwritten its environment, so the marker alone can miss it; its parent tells."""
    parents: dict[int, tuple[int, bytes]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = _stat(int(entry.name))
            except OSError:
                continue
    found, grew = {root}, True
    while grew:
        grew = False
        for pid, (ppid, _) in parents.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    found.discard(root)
    out = {}
    for pid in found:
        try:
            out[pid] = (parents[pid][1], (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))[:120])
        except OSError:
            continue
    return out


def still_alive(seen: dict[int, tuple[bytes, str]], seconds: float = 30.0) -> list[str]:
    """Those of ``seen`` still running after ``seconds`` at most (the same processes, by start time)."""
    deadline = time.monotonic() + seconds
    while True:
        alive = []
        for pid, (started, command) in seen.items():
            try:
                if _stat(pid)[1] == started:
                    alive.append(f"{pid}: {command}")
            except OSError:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def wait_until_gone(marker: str, seconds: float = 15.0) -> list[str]:
    deadline = time.monotonic() + seconds
    left = marked_processes(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = marked_processes(marker)
    return left


def start_farm(tmp_path: Path, suite: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``farm test`` on the embedded Ray, two conversations at a time, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "test", "-i", str(suite), "--parallel", "2", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def wait_for_results(tmp_path: Path, count: int, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    lines = 0
    while time.monotonic() < deadline and lines < count:
        time.sleep(0.1)
        files = list((tmp_path / "results").glob("*/results.jsonl"))
        lines = len(files[0].read_text().splitlines()) if files else 0
    assert lines >= count, f"the run never wrote {count} results"


def write_project(tmp_path: Path, url: str, cases: list[dict]) -> Path:
    (tmp_path / "farm.toml").write_text(farm_toml(url, engine="ray"))
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return suite


def test_sigint_stops_an_embedded_run_quickly_then_resume_finishes_it_and_leaves_no_process_or_file(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.5"} for i in range(24)])
    env, marker = embedded_env(tmp_path)
    proc = start_farm(tmp_path, suite, env)
    try:
        wait_for_results(tmp_path, 2)
        started = descendants(proc.pid)
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
    assert still_alive(started) == [], "processes of the embedded Ray outlived the interrupted run"

    run_dir = Path(match.group(1))
    resumed = subprocess.run(
        [sys.executable, "-m", "farm.cli", "test", "--resume", str(run_dir), "--parallel", "6", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"c{i}" for i in range(24)), "exactly one result per case"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["counts"]["passed"] == 24 and info["ray"]["address"] == "local"
    timings = info["timings"]
    assert 0 < timings["engine_ready_s"] <= timings["first_result_s"] <= timings["last_result_s"] <= timings["closed_s"]
    assert "Traceback" not in resumed.stderr and "Raylet" not in resumed.stderr + resumed.stdout
    assert wait_until_gone(marker) == [], "processes of the embedded Ray outlived the resumed run"
    # Ray 2.59+ would write ~/.ray/auth_token for a new local cluster, and its session files stay
    # in its temp folder: the embedded Ray gets its token in the environment and a temp folder of
    # its own, removed when the run ends (interrupted or not)
    assert list(Path(env["HOME"]).iterdir()) == []
    ray_tmp = Path(env["RAY_TMPDIR"])
    assert ray_tmp.is_dir() and list(ray_tmp.iterdir()) == []  # its farm-ray-* folders are gone
    ray_tmp.rmdir()


def test_kill_9_of_the_farm_leaves_no_ray_process_and_resume_completes_both_tables(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.3"} for i in range(12)])
    env, marker = embedded_env(tmp_path)
    proc = start_farm(tmp_path, suite, env)
    try:
        wait_for_results(tmp_path, 2)
        started = descendants(proc.pid)
        assert any("DashboardAgent" in command or "dashboard/agent.py" in command for _, command in started.values()), started
    finally:
        proc.kill()
        proc.wait()
    assert still_alive(started) == [], "processes of the embedded Ray outlived a kill -9 of the farm"
    assert wait_until_gone(marker) == [], "processes of the embedded Ray outlived a kill -9 of the farm"

    [run_dir] = (tmp_path / "results").iterdir()
    resumed = subprocess.run(
        [sys.executable, "-m", "farm.cli", "test", "--resume", str(run_dir), "--engine", "local", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = sorted(json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines())
    assert ids == sorted(f"c{i}" for i in range(12)), "exactly one result per case"
    assert sorted(pq.read_table(run_dir / "cases.parquet").column("case_id").to_pylist()) == ids
    assert json.loads((run_dir / "run.json").read_text())["counts"]["passed"] == 12


def test_a_dead_embedded_ray_stops_the_run_with_one_sentence_and_resume_runs_the_rest(tmp_path, scripted):
    suite = write_project(tmp_path, scripted.url, [{"id": f"c{i}", "input": "slow 0.3"} for i in range(40)])
    env, marker = embedded_env(tmp_path)
    proc = start_farm(tmp_path, suite, env)
    try:
        wait_for_results(tmp_path, 2)
        started = descendants(proc.pid)
        vital = ("DashboardAgent", "RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent/main.py")
        agents = [pid for pid, (_, command) in started.items() if any(name in command for name in vital)]
        assert agents, started
        os.kill(agents[0], signal.SIGKILL)  # a vital agent of the node: the node dies
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
    assert still_alive(started) == [] and wait_until_gone(marker) == []

    resumed = subprocess.run(
        [sys.executable, "-m", "farm.cli", "test", "--resume", str(run_dir), "--engine", "local", "--config", str(tmp_path / "farm.toml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ids = sorted(json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines())
    assert ids == sorted(f"c{i}" for i in range(40))
