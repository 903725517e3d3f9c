"""The README's tour works as written: its suite and farm.toml load, and the suite passes
against the demo agent (SPEC 7; issue 10).

Offline, two things are swapped in the README's farm.toml: the connector's
``base_url`` points at the demo agent on 127.0.0.1 (no key), and the two role
agents are the demo's deterministic Python simulator and validator.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.config import load_config
from farm.loader import load_file

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(kind: str) -> list[str]:
    return re.findall(rf"```{kind}\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


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


@pytest.mark.usefixtures("ray_session")
def test_the_tour_suite_passes_against_the_demo_agent(tmp_path: Path, demo_server, monkeypatch):
    data = tomllib.loads(blocks("toml")[0])
    for conn in data["connectors"].values():
        conn["base_url"] = f"{demo_server.url}/v1"
        conn.pop("api_key_env", None)
    data["agents"]["user-sim"] = {"kind": "python", "entry": "farm.demo.agent:simulator"}
    data["agents"]["judge"] = {"kind": "python", "entry": "farm.demo.agent:validator"}
    data["farm"]["results_dir"] = str(tmp_path / "results")
    lines = []
    for section, table in (("farm", data["farm"]),):
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    for name, conn in data["connectors"].items():
        lines.append(f'[connectors."{name}"]')
        lines += [f"{k} = {_toml(v)}" for k, v in conn.items()]
    for name, agent in data["agents"].items():
        lines.append(f'[agents."{name}"]')
        for k, v in agent.items():
            lines.append(f"{k} = {_toml(v)}")
    (tmp_path / "farm.toml").write_text("\n".join(lines) + "\n")
    suite = tmp_path / "suite.jsonl"
    suite.write_text(blocks("jsonl")[0])
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(app, ["test", "-i", str(suite), "--config", str(tmp_path / "farm.toml"), "-o", str(out)], catch_exceptions=False)
    statuses = {r["id"]: r["status"] for r in map(json.loads, out.read_text().splitlines())}
    assert statuses == {"greet": "passed", "flow": "passed", "cover": "passed"}, result.output
    assert result.exit_code == 0


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def test_the_tour_generates_a_suite_with_the_demo_generator(tmp_path: Path, monkeypatch):
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
