"""docs/guide.md works as written: its suite and farm.toml load, every ``farm`` command of it
runs in a fresh project and passes against the demo agent, and its Python snippets run.

Offline, two things are swapped in the guide's farm.toml: the connector's
``base_url`` points at the demo agent on 127.0.0.1 (no key), and the role agents
are the demo's deterministic Python simulator, validator and generator.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.config import load_config
from farm.suite.loader import load_file

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def test_every_jsonl_snippet_is_one_object_per_line_and_valid(tmp_path: Path):
    snippets = blocks("jsonl")
    assert snippets
    for i, text in enumerate(snippets):
        for line in text.splitlines():
            if line.strip() and not line.startswith("//"):
                assert isinstance(json.loads(line), dict), line
        path = tmp_path / f"s{i}.jsonl"
        path.write_text(text)
        suite = load_file(path)
        assert suite.problems == [] and suite.cases


def test_every_toml_snippet_loads(tmp_path: Path):
    snippets = blocks("toml")
    assert snippets
    for i, text in enumerate(snippets):
        path = tmp_path / f"farm{i}.toml"
        path.write_text(text)
        config = load_config(path)
        assert config.agents


def guide_project(root: Path, demo_url: str) -> Path:
    """The guide's project in ``root``: its farm.toml (its connector pointed at the demo
    agent, with no key; its simulator, judge and generator the demo's deterministic functions),
    its suite as ``suite.jsonl`` and its script tests as ``scripts/checks.py``."""
    data = tomllib.loads(blocks("toml")[0])
    for conn in data["connectors"].values():
        conn["base_url"] = f"{demo_url}/v1"
        conn.pop("api_key_env", None)
        for limit in ("rpm", "tpm"):  # the commands are under test here, not the limiter (tests/farm/test_ratelimit.py)
            conn.pop(limit, None)
    for name, entry in (("user-sim", "simulator"), ("judge", "validator"), ("gen", "generator")):
        data["agents"][name] = {"kind": "python", "entry": f"farm.demo.agent:{entry}"}
    lines = ["[farm]", *(f"{k} = {json.dumps(v)}" for k, v in data["farm"].items())]
    for name, conn in data["connectors"].items():
        lines.append(f'[connectors."{name}"]')
        lines += [f"{k} = {_toml(v)}" for k, v in conn.items()]
    for name, agent in data["agents"].items():
        lines.append(f'[agents."{name}"]')
        lines += [f"{k} = {_toml(v)}" for k, v in agent.items()]
    (root / "farm.toml").write_text("\n".join(lines) + "\n")
    (root / "suite.jsonl").write_text(blocks("jsonl")[0])
    (root / "scripts").mkdir()
    (root / "scripts" / "checks.py").write_text(next(b for b in blocks("python") if b.startswith("# scripts/checks.py")))
    return root


#: The guide's commands that cannot run here, and where they are tested instead.
ELSEWHERE = {
    "--interactive": "needs a person at a terminal (tests/cli/test_interactive.py)",
    "farm view": "a server that runs until Ctrl-C (tests/farm/view/test_server.py)",
}


def farm_commands() -> list[list[str]]:
    """Every ``farm`` command of the guide's shell blocks, in order, as argument lists."""
    commands = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            command = line.split("&&")[-1].strip()
            if not command.startswith("farm ") or any(skip in line for skip in ELSEWHERE):
                continue
            commands.append(shlex.split(command, comments=True)[1:])
    return commands


@pytest.mark.usefixtures("ray_session")
def test_every_farm_command_and_python_snippet_of_the_guide_runs_as_written(tmp_path: Path, demo_server, monkeypatch):
    """The guide followed step by step in a fresh project: each command exits 0 (the suite's cases
    pass against the demo agent), and the Python snippets run on the results it wrote."""
    import ray

    monkeypatch.chdir(guide_project(tmp_path, demo_server.url))
    runner = CliRunner()
    commands = [["validate", "suite.jsonl"], ["agents"], *farm_commands(), ["report", "farm-results"]]
    generating = next(args for args in commands if args[:2] == ["test", "-i"] and args[2].startswith("agents:gen?"))
    count = int(dict(parse_qsl(generating[2].partition("?")[2]))["count"])
    assert ["test", "-i", "scripts.checks"] in commands and generating[-2:] == ["-o", "generated.jsonl"]
    first_run = None  # the run of `farm test -i suite.jsonl`: the guide's <run_id>

    def runs() -> set[str]:
        return {p.name for p in Path("farm-results").glob("*/run.json") for p in [p.parent]}

    for args in commands:
        if any("<run_id>" in arg for arg in args):
            args = [arg.replace("<run_id>", first_run or "") for arg in args]
        before = runs()
        with monkeypatch.context() as env:
            if "--address" in args:  # what --address auto finds: the session's Ray (RAY_ADDRESS), not another on this machine
                env.setenv("RAY_ADDRESS", ray.get_runtime_context().gcs_address)
            result = runner.invoke(app, args, catch_exceptions=False)
        assert result.exit_code == 0, f"farm {shlex.join(args)}: {result.output}"
        if args == ["test", "-i", "suite.jsonl"]:
            (first_run,) = runs() - before
            lines = (Path("farm-results") / first_run / "results.jsonl").read_text().splitlines()
            assert {r["id"]: r["status"] for r in map(json.loads, lines)} == {"greet": "passed", "flow": "passed", "cover": "passed"}
        if args == ["test", "-i", "scripts.checks"]:
            (checks,) = runs() - before
            lines = (Path("farm-results") / checks / "results.jsonl").read_text().splitlines()
            assert [r["status"] for r in map(json.loads, lines)] == ["passed", "passed"]
    generated = [json.loads(line) for line in Path("generated.jsonl").read_text().splitlines()]
    assert len(generated) == count and len({case["input"] for case in generated}) == count
    for snippet in blocks("python"):
        if not snippet.startswith("# scripts/"):
            exec(compile(snippet.replace("<run_id>", first_run or ""), "docs/guide.md", "exec"), {})


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def test_the_guide_generates_a_suite_with_the_demo_generator(tmp_path: Path, monkeypatch):
    """Step 8 runs as written: the demo's generator writes the cases the demo agent passes."""
    (command,) = [line for text in blocks("bash") for line in text.splitlines() if line.startswith("farm demo -i ")]
    query = re.search(r'-i "([^"]+)"', command).group(1)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo", "-i", query, "--results-dir", str(tmp_path / "results")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (run_dir,) = [p.parent for p in (tmp_path / "results").glob("*/run.json")]
    cases = [json.loads(line) for line in (run_dir / "generated.jsonl").read_text().splitlines()]
    assert len(cases) == 60 and len({c["id"] for c in cases}) == 60
    focus = [t for c in cases for t in c["tags"]]
    assert {t: focus.count(t) for t in set(focus)} == {"focus:travel": 20, "focus:meal": 20, "focus:taxi": 20}
    statuses = {json.loads(line)["status"] for line in (run_dir / "results.jsonl").read_text().splitlines()}
    assert statuses == {"passed"}
