"""What a command imports: only its own module and what it uses, so short commands start at once.

Each command runs in a fresh Python process (the imports of this test session would hide
the command's own), which writes the modules it ended with to a file.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
from farm.cli.app import COMMANDS, YOUNG_THRESHOLD, app
from typer.testing import CliRunner

from farm.demo.server import JSONServer
from tests.scripted import ScriptedAgent, farm_toml

CHILD = """
import json, sys
from farm.cli.app import app
try:
    app(sys.argv[2:], prog_name="farm")
except SystemExit as done:
    code = done.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""

IN_ORDER = """
import json, sys
from farm.cli.app import app
order = []
class Recorder:
    def find_spec(self, name, path=None, target=None):
        order.append(name)
sys.meta_path.insert(0, Recorder())
try:
    app(sys.argv[2:], prog_name="farm")
except SystemExit as done:
    code = done.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "order": order}, out)
"""

MAIN = """
import atexit, gc, json, sys
from farm.cli.app import main
out, passes = sys.argv[1], []
gc.callbacks.append(lambda phase, info: phase == "stop" and passes.append(info["generation"]))
def record():
    with open(out, "w") as file:
        json.dump({"threshold": gc.get_threshold(), "passes": passes}, file)
atexit.register(record)
sys.argv = ["farm", *sys.argv[2:]]
main()
"""

REPORTS_AND_VIEWER = ("farm.reports", "farm.view", "farm.cli.report", "farm.cli.view", "farm.cli.rescore")


def modules_after(tmp_path: Path, *args: str) -> set[str]:
    """The modules a fresh process has loaded after ``farm args...`` (which must exit 0)."""
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", CHILD, str(out), *args], cwd=tmp_path, capture_output=True, timeout=120, check=True)
    found = json.loads(out.read_text())
    assert found["code"] in (0, None)
    return set(found["modules"])


def loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.startswith(prefixes))


def test_help_imports_no_command(tmp_path: Path):
    modules = modules_after(tmp_path, "--help")
    assert loaded(modules, ("farm.cli.",)) == ["farm.cli.app"]
    assert loaded(modules, ("pydantic", "httpx", "farm.results", "farm.suite")) == []


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_is_listed_and_has_its_help(name: str):
    listing = CliRunner().invoke(app, ["--help"])
    assert listing.exit_code == 0
    assert f"{name}  " in listing.output and COMMANDS[name][1] in listing.output
    own = CliRunner().invoke(app, [name, "--help"])
    assert own.exit_code == 0, own.output
    assert own.output.startswith("Usage: ") and f" {name} " in own.output.splitlines()[0]


def test_a_mistyped_command_names_the_nearest():
    result = CliRunner().invoke(app, ["tset"])
    assert result.exit_code == 2
    assert "No such command 'tset'. Did you mean 'test'?" in result.output


def test_a_test_run_imports_no_report_or_viewer(tmp_path: Path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]}) + "\n" for i in range(3)))
    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        modules = modules_after(tmp_path, "test", "-i", str(suite))
    assert (tmp_path / "results").is_dir()
    assert "farm.cli.test" in modules and "farm.writers.parquet" in modules
    assert loaded(modules, REPORTS_AND_VIEWER) == []
    assert "httpx" in modules
    assert loaded(modules, ("httpx._main", "pygments", "click")) == []  # httpx's command-line client


def test_a_test_run_loads_pyarrow_only_once_its_first_request_is_out(tmp_path: Path):
    """pyarrow (~50 ms with its first conversions) is loaded when the run's loop first waits for its
    agent: after aiohttp, which the first request imports, not among the imports before the run."""
    suite = tmp_path / "suite.jsonl"
    suite.write_text('{"id": "a", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]}\n')
    out = tmp_path / "order.json"
    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        subprocess.run([sys.executable, "-c", IN_ORDER, str(out), "test", "-i", str(suite)], cwd=tmp_path, capture_output=True, timeout=120, check=True)
    found = json.loads(out.read_text())
    assert found["code"] in (0, None)
    assert sorted((tmp_path / "results").glob("*/cases.parquet"))  # the tables were written
    order = found["order"]
    assert order.index("aiohttp") < order.index("pyarrow")


def test_validate_imports_no_engine_or_writer(tmp_path: Path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text('{"id": "a", "input": "Hello"}\n')
    modules = modules_after(tmp_path, "validate", str(suite))
    assert "farm.cli.validate" in modules
    assert loaded(modules, ("farm.engines", "farm.writers", "farm.agents", "pyarrow", "httpx", *REPORTS_AND_VIEWER)) == []


def test_the_collector_seldom_runs_while_a_command_starts(tmp_path: Path):
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "input": "Hello"}) + "\n" for i in range(10)))
    out = tmp_path / "gc.json"
    with JSONServer(ScriptedAgent()) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        done = subprocess.run([sys.executable, "-c", MAIN, str(out), "test", "-i", str(suite)], cwd=tmp_path, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(out.read_text())
    assert found["threshold"][0] == YOUNG_THRESHOLD  # the run restored the process's own after its cases
    assert len(found["passes"]) <= 10  # Python's default threshold made ~130 passes here


def test_a_server_keeps_pythons_own_collector_policy(tmp_path: Path):
    out = tmp_path / "gc.json"
    done = subprocess.run([sys.executable, "-c", MAIN, str(out), "view", "--help"], cwd=tmp_path, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["threshold"] == list(gc.get_threshold())  # a fresh process's: Python's
