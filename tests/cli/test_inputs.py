"""What ``-i`` names, end to end: a value that looks like a path is read as one, so a mistyped
suite path is exit 2 before any call, naming the nearest file; a message is still a message;
folders, globs and ``-i`` given several times run every suite in one run (a real agent on
127.0.0.1 counts the calls)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion
from farm.results import read_run
from farm.results._suites import suite_of
from farm.view.transcript import case_detail
from tests.scripted import farm_toml


@pytest.fixture(scope="module")
def server():
    with JSONServer(lambda path, body, headers: Response(chat_completion("fine"))) as s:
        yield s


@pytest.fixture
def project(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with two suites in ``suites/`` and a ``notes.txt`` beside them, on the local engine."""
    (tmp_path / "farm.toml").write_text(farm_toml(server.url, engine="local"))
    (tmp_path / "suites").mkdir()
    for name, ids in (("smoke.jsonl", ["s1", "s2"]), ("billing.jsonl", ["b1"])):
        (tmp_path / "suites" / name).write_text("".join(json.dumps({"id": i, "input": "hi", "assertions": [{"type": "contains", "value": "fine"}]}) + "\n" for i in ids))
    (tmp_path / "suites" / "notes.txt").write_text("not a suite\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def farm(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def ran(project: Path) -> list[str]:
    """The case ids of the project's one run, in the order the results file has them."""
    (results,) = (project / "results").glob("*/results.jsonl")
    return sorted(json.loads(line)["id"] for line in results.read_text().splitlines())


@pytest.mark.parametrize(
    ("value", "nearest"),
    [
        ("suites/smoke", "suites/smoke.jsonl"),  # no ending
        ("suites/smoke.jsnol", "suites/smoke.jsonl"),  # a typo in the ending
        ("smoke.jsonl", "suites/smoke.jsonl"),  # the folder left out
        ("suits/billing.jsonl", "suites/billing.jsonl"),  # a typo in the folder
    ],
)
def test_a_mistyped_suite_path_is_exit_2_before_any_call_naming_the_nearest_file(project: Path, server: JSONServer, value: str, nearest: str):
    before = server.requests
    result = farm("test", "-q", "-i", value)
    assert result.exit_code == 2, result.output
    (line,) = result.output.splitlines()
    assert line.startswith(f"error: -i {value}: no such file or folder (did you mean '{nearest}'?)")
    assert server.requests == before and not (project / "results").exists()
    checked = farm("validate", value)  # farm validate reads it through the same rule
    assert checked.exit_code == 2 and f"error: {value}: no such file or folder (did you mean '{nearest}'?)" in checked.output


def test_a_message_is_still_a_message_and_the_run_says_so(project: Path, server: JSONServer):
    before = server.requests
    result = farm("test", "-i", "Hello, I need help")
    assert result.exit_code == 0, result.output
    assert "Input: message 'Hello, I need help' (1 test case)" in result.output
    assert "[message]" in result.output
    assert server.requests == before + 1
    quiet = farm("test", "-q", "-i", "Hello?")  # no whitespace, but neither a separator, an extension nor a glob
    assert quiet.exit_code == 0, quiet.output
    assert "1 passed in" in quiet.output and "(-i was a message, not a suite file)" in quiet.output


def test_a_folder_a_glob_and_repeated_inputs_run_every_suite_in_one_run(project: Path, server: JSONServer, engine: str):
    (project / "farm.toml").write_text(farm_toml(server.url, engine=engine))
    folder = farm("test", "-q", "-i", "./suites")
    assert folder.exit_code == 0, folder.output
    assert "3 passed" in folder.output and "message" not in folder.output
    assert ran(project) == ["b1", "s1", "s2"]  # notes.txt is no *.jsonl

    shutil.rmtree(project / "results")
    both = farm("test", "-q", "-i", "suites/smoke.jsonl", "-i", "suites/b*.jsonl", "-i", str(project / "suites" / "smoke.jsonl"))
    assert both.exit_code == 0, both.output
    assert ran(project) == ["b1", "s1", "s2"]  # smoke.jsonl given twice runs once
    (run_json,) = (project / "results").glob("*/run.json")
    info = json.loads(run_json.read_text())
    assert info["inputs"] == ["suites/smoke.jsonl", "suites/b*.jsonl", str(project / "suites" / "smoke.jsonl")]


def test_a_case_id_in_two_suites_is_two_cases_that_resume_rescore_and_report_apart(project: Path, server: JSONServer, engine: str):
    (project / "farm.toml").write_text(farm_toml(server.url, engine=engine))
    (project / "other").mkdir()
    (project / "other" / "smoke.jsonl").write_text(json.dumps({"id": "s1", "input": "other hi", "assertions": [{"type": "contains", "value": "fine"}]}) + "\n")
    first = farm("test", "-q", "-i", "suites/smoke.jsonl", "-i", "other/smoke.jsonl", "--junit", "junit.xml", "--update-golden", "golden")
    assert first.exit_code == 0, first.output
    (results,) = (project / "results").glob("*/results.jsonl")

    def keys() -> list[tuple[str, str, str]]:
        records = [json.loads(line) for line in results.read_text().splitlines()]
        return sorted((suite_of(r["source"]), r["id"], r["turns"][0]["input"]) for r in records)

    both = [("other/smoke.jsonl", "s1", "other hi"), ("suites/smoke.jsonl", "s1", "hi"), ("suites/smoke.jsonl", "s2", "hi")]
    assert keys() == both  # neither s1 overwrote the other
    assert json.loads((project / "golden" / "other" / "smoke" / "s1.json").read_text())["turns"][0]["input"] == "other hi"
    assert json.loads((project / "golden" / "suites" / "smoke" / "s1.json").read_text())["turns"][0]["input"] == "hi"
    tests = ET.parse(project / "junit.xml").getroot().iter("testcase")
    assert sorted((case.get("classname"), case.get("name")) for case in tests) == [
        ("target.other/smoke", "s1"), ("target.suites/smoke", "s1"), ("target.suites/smoke", "s2"),
    ]  # fmt: skip
    run = read_run(results.parent)
    assert case_detail(run, "s1")["suites"] == ["other/smoke.jsonl", "suites/smoke.jsonl"]
    other = case_detail(run, "s1", suite="other/smoke.jsonl")["repetitions"]
    assert [rep["turns"][0]["input"] for rep in other] == ["other hi"]

    lines = results.read_text().splitlines()
    kept = next(line for line in lines if json.loads(line)["source"].startswith("other/"))
    results.write_text(kept + "\n")  # as if interrupted after the other suite's s1
    resumed = farm("test", "-q", "--resume", str(results.parent))
    assert resumed.exit_code == 0, resumed.output
    assert keys() == both  # the missing two ran, each case once

    rescored = farm("rescore", "-q", "--json", str(results.parent))
    assert rescored.exit_code == 0, rescored.output
    events = [json.loads(line) for line in rescored.stdout.splitlines()]
    judged = sorted((e["suite"], e["case"]["id"], e["case"]["status"]) for e in events if e["event"] == "case_result")
    assert judged == [("other/smoke.jsonl", "s1", "passed"), ("suites/smoke.jsonl", "s1", "passed"), ("suites/smoke.jsonl", "s2", "passed")]


def test_stdin_or_a_generator_beside_other_inputs_is_a_usage_error(project: Path, server: JSONServer):
    result = CliRunner().invoke(app, ["test", "-i", "suites/smoke.jsonl", "-i", "-"], input="{}", catch_exceptions=False)
    assert result.exit_code == 2
    assert result.output.strip() == "error: -i -: stdin (-) runs on its own: give it as the only -i"
    empty = project / "empty"
    empty.mkdir()
    assert farm("test", "-i", "empty").output.strip() == "error: -i empty: the folder has no *.jsonl file"
    assert farm("test", "-i", "suites/*.yaml").output.strip() == "error: -i suites/*.yaml: no .jsonl or .json file matches the pattern"


def test_a_run_of_several_suites_resumes_and_rescores_them_all_from_another_folder(project: Path, monkeypatch: pytest.MonkeyPatch):
    assert farm("test", "-q", "-i", "suites/smoke.jsonl", "-i", "suites/billing.jsonl").exit_code == 0
    (results,) = (project / "results").glob("*/results.jsonl")
    lines = results.read_text().splitlines()
    results.write_text(lines[0] + "\n")  # as if interrupted after the first case
    elsewhere = project / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    resumed = farm("test", "-q", "--resume", str(results.parent))
    assert resumed.exit_code == 0, resumed.output
    assert sorted(json.loads(line)["id"] for line in results.read_text().splitlines()) == ["b1", "s1", "s2"]  # each once
    rescored = farm("rescore", "-q", str(results.parent))
    assert rescored.exit_code == 0, rescored.output
    assert "3 passed" in rescored.output
