"""The public API, ``farm.run``, on the local engine: against a real agent server on 127.0.0.1,
from plain code, from inside a running event loop, and across an interrupt and a resume.
None of these start Ray."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import farm
from farm.demo.server import JSONServer
from tests.scripted import ScriptedAgent, farm_toml

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scripted():
    with JSONServer(ScriptedAgent()) as server:
        yield server


@pytest.fixture
def project(tmp_path: Path, scripted: JSONServer) -> Path:
    (tmp_path / "farm.toml").write_text(farm_toml(scripted.url))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text(
        "async def main(meta):\n"
        "    return [{'id': f'g{i}', 'input': f'Hello {i}', 'assertions': [{'type': 'contains', 'value': 'expense'}]} for i in range(int(meta.get('count', 2)))]\n"
    )
    (tmp_path / "scripts" / "hooks.py").write_text(
        "import json, pathlib\n"
        "async def before(info):\n"
        "    pathlib.Path(__file__).with_name('before.json').write_text(json.dumps(info))\n"
    )
    return tmp_path


def write_suite(folder: Path, cases: list[dict]) -> Path:
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def test_run_returns_the_exit_code_the_run_folder_and_the_summary(project: Path):
    suite = write_suite(project, [
        {"id": "ok", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
        {"id": "no", "input": "Hello", "assertions": [{"type": "contains", "value": "pirate"}]},
    ])
    result = farm.run(str(suite), config=project / "farm.toml", engine="local", quiet=True)
    assert result.exit_code == 1 and result.engine == "local"
    assert result.summary.passed == 1 and result.summary.failed == 1
    assert result.run_dir.parent == project / "results" and (result.run_dir / "cases.parquet").is_file()
    info = json.loads((result.run_dir / "run.json").read_text())
    assert info["engine"] == "local" and info["status"] == "finished" and info["counts"]["total"] == 2
    assert info["command"][0] == "farm.run"


def test_run_works_inside_a_running_event_loop_with_a_generator_and_a_hook(project: Path):
    """As in a notebook cell: the loop runs, and the generator, the hook and the run still do."""

    async def cell() -> farm.RunResult:
        return farm.run("scripts:gen?count=3", config=str(project / "farm.toml"), engine="local", before="scripts:hooks.before", quiet=True)

    result = asyncio.run(cell())
    assert result.exit_code == 0, result
    assert result.summary.passed == 3
    assert json.loads((project / "scripts" / "before.json").read_text())["cases"] == 3
    assert len((result.run_dir / "results.jsonl").read_text().splitlines()) == 3


def test_run_async_leaves_the_loop_free(project: Path):
    suite = write_suite(project, [{"id": f"s{i}", "input": "slow 0.3"} for i in range(2)])

    async def main() -> tuple[farm.RunResult, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.ensure_future(tick())
        result = await farm.run_async(str(suite), config=project / "farm.toml", engine="local", quiet=True)
        ticker.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.exit_code == 0
    assert ticks >= 5, "the caller's loop kept running while the cases ran"


def test_the_agents_defaults_reach_the_run(project: Path):
    """tool_mocks from the agent's config answer the tool call, without any CLI in between."""
    case = {"id": "flow", "turns": [
        {"input": "I want to submit an expense"},
        {"input": "Business travel, $3500", "assertions": [{"type": "tool_called", "value": "create_expense"}]},
    ], "final_assertions": [{"type": "json_path", "path": "$.expense.id", "value": "EXP-1"}]}
    result = farm.run(str(write_suite(project, [case])), config=project / "farm.toml", engine="local", quiet=True)
    assert result.exit_code == 0, (result.run_dir / "results.jsonl").read_text()


def test_a_local_run_never_imports_ray(project: Path):
    suite = write_suite(project, [{"id": "a", "input": "Hello"}])
    code = (
        "import sys, farm\n"
        f"r = farm.run({str(suite)!r}, config={str(project / 'farm.toml')!r}, quiet=True)\n"
        "print(r.engine, r.exit_code, 'ray' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1].split() == ["local", "0", "False"], done.stdout + done.stderr  # after the summary


def test_sigint_then_resume_on_the_local_engine_covers_the_whole_run(project: Path):
    cases = [{"id": f"c{i:02d}", "input": "slow 0.4"} for i in range(16)]
    suite = write_suite(project, cases)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "farm.cli", "test", "--engine", "local", "--config", str(project / "farm.toml")]
    proc = subprocess.Popen([*command, "-i", str(suite), "--parallel", "2"], cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(p.stat().st_size for p in (project / "results").glob("*/results.jsonl")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)  # a second Ctrl-C while it cleans up changes nothing
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output
    assert "Interrupted" in output and "Resume with: farm test --resume" in output
    [run_dir] = (project / "results").iterdir()
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not (run_dir / ".parts").exists()
    first = len((run_dir / "results.jsonl").read_text().splitlines())
    assert 0 < first < 16

    done = subprocess.run([*command, "--resume", str(run_dir)], cwd=project, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == [c["id"] for c in cases], "every case exactly once"
    assert sorted(pq.read_table(run_dir / "cases.parquet").column("case_id").to_pylist()) == sorted(ids)
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["counts"]["total"] == 16 and info["counts"]["passed"] == 16
    assert "Total:    16 tests" in done.stdout


def test_the_cli_names_of_options_are_keywords_too(project: Path):
    suite = write_suite(project, [
        {"id": "ok", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
        {"id": "no", "input": "Hello", "assertions": [{"type": "contains", "value": "pirate"}]},
    ])
    result = farm.run(str(suite), config=project / "farm.toml", engine="local", run="^ok$", name="target", quiet=True)
    assert result.exit_code == 0 and result.summary.total == 1
    with pytest.raises(farm.errors.FarmError, match="match='a' and run='b' name the same option"):
        farm.run(str(suite), config=project / "farm.toml", match="a", run="b")
