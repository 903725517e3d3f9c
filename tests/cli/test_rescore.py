"""``farm rescore`` through the real CLI: a run's conversations re-judged after the agent's server stopped."""

from __future__ import annotations

import json
import re
from pathlib import Path

from farm.cli.app import app
from typer.testing import CliRunner

from farm import demo as demo_package
from farm.demo.server import JSONServer
from tests.scripted import Counting, ScriptedAgent, farm_toml


def farm(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False, terminal_width=200)


def write(path: Path, cases: list[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return path


def test_rescore_an_edited_suite_after_the_agent_is_gone(tmp_path: Path):
    agent = Counting(ScriptedAgent())
    cases = [
        {"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
        {"id": "policy", "input": "What is the travel policy?", "assertions": [{"type": "json_path", "path": "$.limit", "value": 5000}]},
    ]
    config = tmp_path / "farm.toml"
    with JSONServer(agent) as server:
        config.write_text(farm_toml(server.url, engine="local"))
        ran = farm("test", "-i", str(write(tmp_path / "suite.jsonl", cases)), "--config", str(config))
    assert ran.exit_code == 0, ran.output
    run_dir = next((tmp_path / "results").iterdir())
    before = agent.requests

    cases[0]["assertions"] = [{"type": "contains", "value": "weather"}]
    cases[1]["input"] = "What is the meal policy?"
    junit = tmp_path / "junit.xml"
    edited = write(tmp_path / "edited.jsonl", cases)
    result = farm("rescore", str(run_dir), "-i", str(edited), "--config", str(config), "--junit", str(junit), "--no-cache")
    assert result.exit_code == 1, result.output
    assert agent.requests == before
    assert "1 not rescorable" in result.output and f"Rescored from: {run_dir}" in result.output
    new_dir = next(p for p in (tmp_path / "results").iterdir() if p != run_dir)
    rows = {r["id"]: r for r in map(json.loads, (new_dir / "results.jsonl").read_text().splitlines())}
    assert rows["greet"]["status"] == "failed" and rows["policy"]["rescorable"] is False
    assert json.loads((new_dir / "run.json").read_text())["rescored_from"]["run_id"] == run_dir.name
    assert "not rescorable" in junit.read_text()

    typo = write(tmp_path / "typo.jsonl", [{**cases[0], "asserts": cases[0].pop("assertions")}, cases[1]])
    refused = farm("rescore", str(run_dir), "-i", str(typo), "--config", str(config))
    assert refused.exit_code == 2, refused.output  # a suite with a problem stops a rescore as it stops a run
    assert f"{typo}:1: field 'asserts': unknown field (did you mean 'assertions'?)" in refused.output
    assert len(list((tmp_path / "results").iterdir())) == 2  # and writes no run folder

    events = farm("rescore", str(run_dir), "--config", str(config), "--run", "^greet$", "--json")
    assert events.exit_code == 0
    kinds = [json.loads(line)["event"] for line in events.stdout.splitlines() if line.startswith("{")]
    assert kinds == ["run_start", "case_result", "summary"]


def test_a_folder_that_is_not_a_run_exits_2_with_one_sentence(tmp_path: Path):
    result = farm("rescore", str(tmp_path))
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {tmp_path} is not a run folder: it has no run.json (give a folder that farm test wrote, e.g. farm-results/<run_id>)"


def test_farm_report_compares_a_run_with_its_rescore_of_an_edited_copy(tmp_path: Path):
    """docs/guide.md's flow: rescore an edited copy of the suite (another file), then farm report OLD NEW.
    A rescored case is the case it judged again: it keeps its suite and pairs; a case that could not
    be rescored is no regression."""
    cases = [
        {"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
        {"id": "loose", "input": "Hello", "assertions": [{"type": "contains", "value": "weather"}]},
        {"id": "moved", "input": "Hello"},
    ]
    config = tmp_path / "farm.toml"
    with JSONServer(ScriptedAgent()) as server:
        config.write_text(farm_toml(server.url, engine="local"))
        ran = farm("test", "-i", str(write(tmp_path / "suite.jsonl", cases)), "--config", str(config))
    assert ran.exit_code == 1, ran.output
    old = next((tmp_path / "results").iterdir())

    cases[0]["assertions"] = [{"type": "contains", "value": "weather"}]  # passed -> failed
    cases[1]["assertions"] = [{"type": "contains", "value": "expense"}]  # failed -> passed
    cases[2]["input"] = "Hi"  # passed -> not rescorable: no regression
    edited = write(tmp_path / "edited.jsonl", cases)
    assert farm("rescore", str(old), "-i", str(edited), "--config", str(config)).exit_code == 1
    new = next(p for p in (tmp_path / "results").iterdir() if p not in (old,) and not p.name.startswith("."))

    report = farm("report", str(old), str(new), "--json")
    assert report.exit_code == 0, report.output
    comparison = json.loads(report.output)["comparison"]
    assert [c["case_id"] for c in comparison["regressions"]] == ["greet"]
    assert [c["case_id"] for c in comparison["fixes"]] == ["loose"]


def test_rescore_finds_the_runs_suite_and_config_from_another_folder(tmp_path: Path, monkeypatch):
    """run.json records the folder the run started in and its farm.toml: a rescore started
    elsewhere reads the same suite with the same config, without -i or --config."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir(), elsewhere.mkdir()
    cases = [{"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]}]
    with JSONServer(ScriptedAgent()) as server:
        (project / "farm.toml").write_text(farm_toml(server.url, engine="local"))
        write(project / "suite.jsonl", cases)
        monkeypatch.chdir(project)
        assert farm("test", "-i", "suite.jsonl").exit_code == 0
    run_dir = next((project / "results").iterdir())
    info = json.loads((run_dir / "run.json").read_text())
    assert info["input"] == "suite.jsonl" and info["cwd"] == str(project)

    monkeypatch.chdir(elsewhere)
    result = farm("rescore", str(run_dir))
    assert result.exit_code == 0, result.output
    new = next(p for p in (project / "results").iterdir() if p != run_dir and not p.name.startswith("."))
    assert [json.loads(line)["status"] for line in (new / "results.jsonl").read_text().splitlines()] == ["passed"]
    assert json.loads((new / "run.json").read_text())["rescored_from"]["run_dir"] == str(run_dir)

    gone = farm("rescore", str(elsewhere / "no-such-run"))
    assert gone.exit_code == 2 and "does not exist" in gone.output


def test_a_demo_run_is_rescored_beside_it_from_the_cache_the_run_filled(tmp_path: Path):
    """farm demo writes to ./farm-results, not to the results_dir of its bundled farm.toml: the
    rescore's folder goes beside the run, and its validator calls are answered by that folder's cache."""
    results = tmp_path / "farm-results"
    assert farm("demo", "--engine", "local", "--results-dir", str(results)).exit_code == 0
    (run_dir,) = (p for p in results.iterdir() if p.name != ".cache")
    bundled = Path(demo_package.__file__).parent / "farm-results"
    bundled_before = set(bundled.iterdir()) if bundled.exists() else set()

    result = farm("rescore", str(run_dir))
    assert result.exit_code == 0, result.output
    (new_dir,) = (p for p in results.iterdir() if p not in (run_dir, results / ".cache"))
    assert (new_dir / "results.jsonl").is_file() and str(new_dir / "results.jsonl") in result.output.replace("\n", "")
    assert (set(bundled.iterdir()) if bundled.exists() else set()) == bundled_before
    calls = re.search(r"Role calls: (\d+) \((\d+) from the cache\)", result.output)
    assert calls is not None and int(calls[1]) == int(calls[2]) >= 1, result.output


def test_a_run_of_a_tag_is_rescored_as_that_selection_unless_rescore_says_otherwise(tmp_path: Path):
    cases = [
        {"id": "greet", "input": "Hello", "tags": ["smoke", "fast"], "assertions": [{"type": "contains", "value": "expense"}]},
        {"id": "policy", "input": "What is the travel policy?", "tags": ["smoke"]},
        {"id": "other", "input": "Hello"},
    ]
    config = tmp_path / "farm.toml"
    suite = write(tmp_path / "suite.jsonl", cases)
    with JSONServer(ScriptedAgent()) as server:
        config.write_text(farm_toml(server.url, engine="local"))
        assert farm("test", "-i", str(suite), "--config", str(config), "--tag", "smoke").exit_code == 0
    (run_dir,) = (p for p in (tmp_path / "results").iterdir() if p.name != ".cache")

    kept = farm("rescore", str(run_dir), "--config", str(config))
    assert kept.exit_code == 0, kept.output
    assert "not rescorable" not in kept.output
    new_dir = next(p for p in (tmp_path / "results").iterdir() if p not in (run_dir, tmp_path / "results" / ".cache"))
    assert sorted(json.loads(line)["id"] for line in (new_dir / "results.jsonl").read_text().splitlines()) == ["greet", "policy"]
    assert json.loads((new_dir / "run.json").read_text())["options"]["tags"] == ["smoke"]

    narrowed = farm("rescore", str(run_dir), "--config", str(config), "--tag", "fast", "--json")
    assert narrowed.exit_code == 0, narrowed.output
    ids = [e["case"]["id"] for e in map(json.loads, narrowed.stdout.splitlines()) if e["event"] == "case_result"]
    assert ids == ["greet"]
