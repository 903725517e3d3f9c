"""``farm view`` as a user starts it: the URL on standard output, the results folder from farm.toml, one sentence for a bad folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "view", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def with_a_run(results: Path) -> Path:
    """``results`` holding one run folder, still running: a results folder ``farm view`` serves."""
    (results / "20260101-000000-abcdef").mkdir(parents=True, exist_ok=True)
    (results / "20260101-000000-abcdef" / "run.json").write_text(
        json.dumps({"run_id": "20260101-000000-abcdef", "status": "running"})
    )
    return results


def test_view_serves_the_configured_results_folder_on_loopback(tmp_path: Path):
    results = with_a_run(tmp_path / "out")
    (tmp_path / "farm.toml").write_text('[farm]\nresults_dir = "out"\n')
    child = start("--port", "0", cwd=tmp_path)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("farm view: http://127.0.0.1:") and str(results.resolve()) in line
        url = line.split()[2]
        with urllib.request.urlopen(url + "api/runs", timeout=30) as response:
            runs = json.load(response)["runs"]
        assert [run["name"] for run in runs] == ["20260101-000000-abcdef"]
        with urllib.request.urlopen(url, timeout=30) as response:
            assert b"farm view" in response.read()
    finally:
        child.terminate()
        _, err = child.communicate(timeout=30)
    assert "warning" not in err and "Traceback" not in err


def test_view_of_a_missing_folder_is_one_sentence(tmp_path: Path):
    child = start(str(tmp_path / "nowhere"), cwd=tmp_path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 2
    assert err.strip().startswith("error: Cannot view") and "nowhere" in err and "Traceback" not in err
    assert out == ""


@pytest.mark.parametrize("folder, said", [
    ("empty", "error: Cannot view empty, as there is no run folder in it; run `farm test` first or name a results folder."),
    ("out/20260101-000000-abcdef", "error: Cannot view out/20260101-000000-abcdef, as it is one run's folder; name the results folder that holds it (out)."),
])  # fmt: skip
def test_a_folder_that_is_no_results_folder_is_one_sentence(tmp_path: Path, folder: str, said: str):
    (tmp_path / "empty").mkdir()
    with_a_run(tmp_path / "out")
    child = start(folder, cwd=tmp_path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 2
    assert err.strip() == said and out == ""


@pytest.mark.parametrize("args, said", [
    (["--port", "99999"], "error: --port 99999 is not a port: give one from 1 to 65535, or 0 for a free one."),
    (["--host", "10.255.255.1"], "error: Cannot listen on 10.255.255.1:0: 10.255.255.1 is not an address of this machine; try --host 127.0.0.1."),
])  # fmt: skip
def test_a_port_or_host_that_cannot_be_listened_on_is_one_sentence(tmp_path: Path, args: list[str], said: str):
    child = start(str(with_a_run(tmp_path)), *args, cwd=tmp_path)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 2
    assert err.strip() == said and out == ""


def test_a_port_in_use_asks_for_another_port(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = start(str(with_a_run(tmp_path)), "--port", str(port), cwd=tmp_path)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 2
    assert err.strip() == f"error: Cannot listen on 127.0.0.1:{port}: the port is in use; try another --port (0: a free one)."


def test_view_serves_on_ipv6_loopback(tmp_path: Path):
    child = start(str(with_a_run(tmp_path)), "--host", "::1", cwd=tmp_path)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("farm view: http://[::1]:"), line
        with urllib.request.urlopen(line.split()[2] + "api/runs", timeout=30) as response:
            assert [run["name"] for run in json.load(response)["runs"]] == ["20260101-000000-abcdef"]
    finally:
        child.terminate()
        _, err = child.communicate(timeout=30)
    assert "warning" not in err and "Traceback" not in err
