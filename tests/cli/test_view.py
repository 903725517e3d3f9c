"""``farm view`` as a user starts it: the URL on standard output, the results folder from farm.toml, one sentence for a bad folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "view", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_view_serves_the_configured_results_folder_on_loopback(tmp_path: Path):
    results = tmp_path / "out"
    (results / "20260101-000000-abcdef").mkdir(parents=True)
    (results / "20260101-000000-abcdef" / "run.json").write_text(json.dumps({"run_id": "20260101-000000-abcdef", "status": "running"}))
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
