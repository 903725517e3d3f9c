"""The Ray Jobs path end to end: a private ``ray start --head`` cluster, a suite submitted
with ``ray job submit --working-dir``, its results read back from an absolute path.

The cluster is separate from the session's Ray (its own ports, temp folder,
home and process group, auth off as for any private test cluster) and is
stopped by killing the process group of the ``ray start --block`` this test
started: ``ray stop`` would stop every Ray on the machine, the session's too.
The Jobs API is served by the full dashboard, so this needs ``ray[default]``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from farm.demo.agent import handle as demo_handle
from farm.demo.server import JSONServer
from tests.scripted import farm_toml

ROOT = Path(__file__).resolve().parents[2]

#: What the job ships: the packages ``python -m farm.cli`` needs (the rest of the repo is not needed).
PACKAGES = ("farm", "actors", "cli")

CASES = [
    {"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
    {"id": "greet-again", "input": "Hi there", "assertions": [{"type": "not_contains", "value": "error"}]},
    {
        "id": "flow",
        "turns": [
            {"input": "I want to submit an expense", "assertions": [{"type": "contains", "value": "type of expense"}]},
            {"input": "Business travel, $3500", "assertions": [{"type": "tool_called", "name": "create_expense"}]},
            {"input": "Yes, confirm", "assertions": [{"type": "contains", "value": "submitted"}]},
        ],
    },
    *({"id": f"bulk-{i}", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]} for i in range(12)),
]


def _jobs_api_missing() -> str | None:
    for module in ("aiohttp", "aiohttp_cors", "grpc"):
        if importlib.util.find_spec(module) is None:
            return f"the Ray Jobs API needs ray[default] ({module} is not installed): pip install 'ray[default]'"
    return None


_MISSING = _jobs_api_missing()
pytestmark = [pytest.mark.ray, pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")]


def _free_ports(n: int) -> list[int]:
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _ray(*args: str) -> list[str]:
    # the ray CLI of this interpreter (in CI a venv's; its bin folder may not be on PATH)
    return [sys.executable, "-m", "ray.scripts.scripts", *args]


class HeadNode:
    """``ray start --head --block`` in its own process group, with the dashboard (the Jobs API)."""

    def __init__(self, base: Path):
        gcs, self.dashboard_port, agent, client = _free_ports(4)
        self.home = base / "home"
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
        self.env.update(
            HOME=str(self.home),
            RAY_AUTH_MODE="disabled",
            RAY_USAGE_STATS_ENABLED="0",
            RAY_TMPDIR=str(base / "tmp"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.log = open(base / "ray-start.log", "wb")
        self.process = subprocess.Popen(
            _ray(
                "start", "--head", "--block",
                "--num-cpus", "1",
                "--include-dashboard=true",
                "--dashboard-host", "127.0.0.1",
                "--dashboard-port", str(self.dashboard_port),
                "--port", str(gcs),
                "--dashboard-agent-listen-port", str(agent),
                "--ray-client-server-port", str(client),
                "--temp-dir", str(base / "ray"),  # short: Ray's unix socket paths must fit in 107 bytes
                "--disable-usage-stats",
            ),
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: what stop() kills
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/version", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise TimeoutError(f"the dashboard at {self.url} did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        """Kill this cluster's processes (and nothing else): TERM the group, then KILL what is left."""
        pgid = self.process.pid
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
        try:
            os.killpg(pgid, signal.SIGKILL)  # what outlived ray start itself
        except ProcessLookupError:
            pass
        self.log.close()


@pytest.fixture
def head():
    # a short base path: the temp folder holds unix sockets
    base = Path(tempfile.mkdtemp(prefix="farm-job-", dir="/tmp"))
    node = HeadNode(base)
    try:
        node.wait_ready(timeout=40)
        yield node
    finally:
        node.stop()
        shutil.rmtree(base, ignore_errors=True)


def _working_dir(folder: Path) -> Path:
    """A copy of the project's packages: what ``ray job submit --working-dir`` uploads."""
    folder.mkdir()
    for package in PACKAGES:
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return folder


def test_a_suite_submitted_as_a_ray_job_writes_its_results_to_an_absolute_path(head: HeadNode, tmp_path: Path):
    with JSONServer(demo_handle) as agent:
        (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine="ray"))
        suite = tmp_path / "suite.jsonl"
        suite.write_text("".join(json.dumps(case) + "\n" for case in CASES))
        results = tmp_path / "shared" / "results.jsonl"
        submission = f"farm-test-{os.getpid()}"

        submit = subprocess.run(
            _ray(
                "job", "submit",
                "--address", head.url,
                "--submission-id", submission,
                "--working-dir", str(_working_dir(tmp_path / "project")),
                "--",
                sys.executable, "-m", "farm.cli", "test",
                "-i", str(suite),
                "--config", str(tmp_path / "farm.toml"),
                "--address", "auto",
                "-o", str(results),
                "--parallel", "8",
            ),
            env=head.env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        log = submit.stdout + submit.stderr

    assert submit.returncode == 0, log
    assert f"Job '{submission}' succeeded" in log, log
    assert "Running entrypoint for job" in log  # the farm's console came back through the job's log

    lines = results.read_text().splitlines()
    got = [json.loads(line) for line in lines]
    assert sorted(r["id"] for r in got) == sorted(c["id"] for c in CASES)  # every case, exactly once
    assert {r["status"] for r in got} == {"passed"}, [(r["id"], r["status"], r["error"]) for r in got]
    flow = next(r for r in got if r["id"] == "flow")
    assert [t["turn"] for t in flow["turns"]] == [1, 2, 3]
    assert all(r["attempt"] == 1 for r in got)

    # the driver joined the job's cluster (it did not start a Ray of its own inside the job),
    # and the run folder (results_dir, relative to the absolute farm.toml) is outside the working dir
    run_dir = tmp_path / "results" / got[0]["run_id"]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "finished"
    assert run["ray"]["address"] == "auto" and run["ray"]["nodes"] == 1
    assert run["counts"]["passed"] == len(CASES)
    cases = pq.read_table(run_dir / "cases.parquet").to_pylist()
    assert sorted(row["case_id"] for row in cases) == sorted(c["id"] for c in CASES)
