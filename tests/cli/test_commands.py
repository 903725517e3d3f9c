"""``farm validate``, ``farm agents`` and ``farm demo`` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer
from tests.scripted import ScriptedAgent

SECRET = "sk-test-0123456789abcdef-do-not-leak"


@pytest.fixture(scope="module")
def scripted_server():
    with JSONServer(ScriptedAgent()) as server:
        yield server


def farm(*args: str, **kw):
    return CliRunner().invoke(app, list(args), catch_exceptions=False, **kw)


def test_validate_reports_every_problem_with_file_and_line(tmp_path: Path):
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "a", "input": "x"}\n')
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "input": "x"}\n{"id": "b", "input": "x", "assertions": [{"type": "nope"}]}\n{"id": "a", "input": "y"}\n')
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{oops\n")
    assert farm("validate", str(good)).exit_code == 0
    result = farm("validate", str(good), str(bad), str(broken))
    assert result.exit_code == 2
    assert f"{bad}:2: field 'assertions[0].type': unknown assertion type 'nope' (known: " in result.output
    assert f"{bad}:3: field 'id': duplicate id 'a'" in result.output
    assert f"{broken}:1: not valid JSON" in result.output


def test_agents_lists_connectors_with_keys_redacted(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FARM_TEST_KEY", SECRET)
    (tmp_path / "farm.toml").write_text(
        '[connectors.llm]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "FARM_TEST_KEY"\nrpm = 60\n'
        'price = { input = 2.5, output = 10 }\n'
        '[agents.bot]\nkind = "openai"\nconnector = "llm"\ndescription = "a bot"\n'
    )
    result = CliRunner().invoke(app, ["agents", "--config", str(tmp_path / "farm.toml")], catch_exceptions=False, terminal_width=250)
    assert result.exit_code == 0
    assert "bot" in result.output and "$FARM_TEST_KEY (set)" in result.output
    assert "in 2.5, out 10" in result.output
    assert SECRET not in result.output


def test_a_key_never_reaches_results_or_run_json(tmp_path: Path, monkeypatch, ray_session, demo_server):
    monkeypatch.setenv("FARM_TEST_KEY", SECRET)
    (tmp_path / "farm.toml").write_text(
        f'[farm]\nresults_dir = "results"\n[connectors.llm]\nbase_url = "{demo_server.url}/v1"\nmodel = "m"\napi_key_env = "FARM_TEST_KEY"\n'
        '[agents.bot]\nkind = "openai"\nconnector = "llm"\n'
    )
    result = farm("test", "-i", "Hello", "-n", "bot", "--config", str(tmp_path / "farm.toml"))
    assert result.exit_code == 0, result.output
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "results").rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
    assert "FARM_TEST_KEY" in written  # the variable's name is recorded...
    assert SECRET not in written and SECRET not in result.output  # ...never its value


def test_demo_runs_offline_and_says_where_results_went(tmp_path: Path, ray_session, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = farm("demo")
    assert result.exit_code == 0, result.output
    assert "Passed:   6" in result.output and "Skipped:  1" in result.output
    (run_dir,) = (p for p in (tmp_path / "farm-results").iterdir() if p.name != ".cache")  # .cache: the role cache
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    statuses = {r["id"]: r["status"] for r in records}
    assert statuses["large-expense"] == "skipped"
    assert statuses["expense-dynamic"] == "passed" and statuses["judged-confirmation"] == "passed"
    assert str(run_dir / "results.jsonl") in result.output.replace("\n", "")


def test_demo_takes_the_no_cache_it_suggests_and_q(tmp_path: Path, monkeypatch, engine: str):
    """A generated input: the header says the cases are being generated, the counts read in the
    singular; run again, the cases come from the role cache and the line names --no-cache, which
    ``farm demo`` takes; ``-q`` prints the summary line only."""
    monkeypatch.chdir(tmp_path)
    generated = ["demo", "--engine", engine, "-i", "agents:demo.generator?count=1"]
    first = farm(*generated)
    assert first.exit_code == 0, first.output
    assert "ℹ Input: agents:demo.generator?count=1 (generating 1 test case)" in first.output
    assert "1 generated case in 1 batch (1 generator call); dropped 0 duplicates" in first.output
    again = farm(*generated)
    assert "1 generated case, from the role cache" in again.output and "--no-cache generates anew" in again.output
    anew = farm(*generated, "--no-cache")
    assert anew.exit_code == 0, anew.output
    assert "1 generated case in 1 batch" in anew.output
    quiet = farm(*generated, "-q")
    assert quiet.exit_code == 0, quiet.output
    assert "Agent Test Farm" not in quiet.output and "1 passed" in quiet.output


def test_test_help_keeps_config_section_names_and_metavars():
    result = CliRunner().invoke(app, ["test", "--help"], catch_exceptions=False, terminal_width=240, env={"COLUMNS": "240"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())  # help lines may still wrap inside their box
    assert "[farm].default_agent" in text and "[farm].engine" in text and "[farm].golden_dir" in text
    assert "--golden DIR" in text and "--update-golden DIR" in text


def test_help_is_plain_and_whole_at_80_columns():
    """No type noise (``<bool>``), no braces around arguments, nothing cut with an ellipsis."""
    for command in (["test"], ["rescore"], ["report"], ["validate"], ["demo"], []):
        result = CliRunner().invoke(app, [*command, "--help"], catch_exceptions=False, terminal_width=80, env={"COLUMNS": "80"})
        assert result.exit_code == 0
        assert "<bool>" not in result.output and "{" not in result.output and "…" not in result.output, result.output
        assert "╭" not in result.output  # no box that cuts long words
    text = " ".join(farm("test", "-h").output.split())
    assert "-q, --quiet" in text and "-x, --fail-fast" in text and "<results_dir>/<run_id>/results.jsonl" in text
    assert "Usage: farm report [OPTIONS] [PATH]..." in farm("report", "--help").output
    assert "Usage: farm validate [OPTIONS] FILE..." in farm("validate", "--help").output


def project_with_failures(tmp_path: Path, scripted_url: str) -> Path:
    from tests.scripted import farm_toml

    (tmp_path / "farm.toml").write_text(farm_toml(scripted_url))
    (tmp_path / "suite.jsonl").write_text(
        json.dumps({"id": "ok", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]}) + "\n"
        + json.dumps({"id": "no", "input": "Hello", "assertions": [{"type": "contains", "value": "pirate"}]}) + "\n"
        + json.dumps({"id": "ok2", "input": "Hello"}) + "\n"
    )
    return tmp_path


def test_quiet_prints_one_line_per_failure_and_the_summary(tmp_path: Path, monkeypatch, scripted_server):
    monkeypatch.chdir(project_with_failures(tmp_path, scripted_server.url))
    result = farm("test", "-i", "suite.jsonl", "-q", "--engine", "local")
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[0] == "✗ [no] FAILED: turn 1: expected the reply to contain 'pirate'"
    assert "Agent Test Farm" not in result.output and "[ok]" not in result.output
    assert lines[-1].startswith("2 passed, 1 failed in ")  # pytest's line, not the summary block, and no gate asked for
    assert "Gate:" not in result.output
    gated = farm("test", "-i", "suite.jsonl", "-q", "--engine", "local", "--min-pass-rate", "1")
    assert [line for line in gated.output.splitlines() if line.strip()][-1].startswith("Gate: failed: 1 of 3 cases below their gate")  # then the verdict, last
    assert "Summary" not in result.output and "Total:" not in result.output


def test_quiet_shows_the_stability_of_unstable_cases_only(tmp_path: Path, monkeypatch, scripted_server):
    monkeypatch.chdir(project_with_failures(tmp_path, scripted_server.url))
    result = farm("test", "-i", "suite.jsonl", "-q", "--runs", "2", "--engine", "local")
    assert result.exit_code == 1
    assert "consistently_failing" in result.output and "│ no " in result.output
    assert "│ ok " not in result.output and "│ ok2 " not in result.output  # stable cases are not listed
    lines = result.output.strip().splitlines()
    said = next(i for i, line in enumerate(lines) if line.startswith("4 passed, 2 failed in "))  # pytest's line
    assert lines[said + 1 :] == ["  no: below the 1 gate: 0 of 2", lines[-1]] and lines[-1].startswith("Gate: failed:")  # then the gate


def test_x_stops_after_the_first_failure_and_report_reads_results_dir(tmp_path: Path, monkeypatch, scripted_server):
    monkeypatch.chdir(project_with_failures(tmp_path, scripted_server.url))
    result = farm("test", "-i", "suite.jsonl", "-x", "-q", "--parallel", "1", "--engine", "local")
    assert result.exit_code == 1
    (run_dir,) = (tmp_path / "results").iterdir()
    ran = [json.loads(line)["id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert ran == ["ok", "no"]  # ok2 was not dispatched after "no" failed
    assert "stopped: --fail-fast: a case did not pass: 2 case runs finished, the rest were not started" in result.output
    report = farm("report", "--json")  # no path: [farm].results_dir of ./farm.toml
    assert report.exit_code == 0
    assert [run["run_id"] for run in json.loads(report.output)["runs"]] == [run_dir.name]


def write_suite(path: Path, cases: dict[str, str]) -> str:
    """A suite of one case per id, passing when the reply contains its word."""
    path.write_text("".join(json.dumps({"id": case_id, "input": "Hello", "assertions": [{"type": "contains", "value": word}]}) + "\n" for case_id, word in cases.items()))
    return path.name


def run_of(suite: str) -> Path:
    """The run folder of a ``farm test`` of ``suite`` on the local engine."""
    ran = farm("test", "-i", suite, "-q", "--engine", "local")
    assert ran.exit_code in (0, 1), ran.output
    return max((Path("results")).iterdir(), key=lambda run: json.loads((run / "run.json").read_text())["started_at"])


def test_report_compares_a_case_only_with_the_same_case_of_the_same_suite(tmp_path: Path, monkeypatch, scripted_server):
    from tests.scripted import farm_toml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "farm.toml").write_text(farm_toml(scripted_server.url))
    passing = run_of(write_suite(tmp_path / "a.jsonl", {"echo": "expense"}))
    failing = run_of(write_suite(tmp_path / "b.jsonl", {"echo": "pirate"}))  # another suite's echo, failing

    for args in (["results"], [str(passing), str(failing)]):  # the last two runs of a folder, or the two named
        said = " ".join(farm("report", *args).output.split())
        assert f"Run {passing.name} and run {failing.name} have no case in common (the same suite and case id), so they are not compared." in said
        assert "percentage points" not in said and "Passed -> failed" not in said and "passed -> failed" not in said
    document = json.loads(farm("report", "--json", "results").output)
    assert document["comparisons"] == [] and (document["comparison"]["paired"], document["comparison"]["left_out"]) == (0, 2)

    write_suite(tmp_path / "a.jsonl", {"echo": "pirate"})
    by_path = run_of(str(tmp_path / "a.jsonl"))  # the same suite named by its absolute path: the same echo
    said = " ".join(farm("report", str(passing), str(by_path)).output.split())
    assert f"Run {passing.name} and run {by_path.name} are compared on the 1 case both ran." in said
    assert "passes 100.0 percentage points less often" in said and "1 passed -> failed" in said

    write_suite(tmp_path / "a.jsonl", {"echo": "expense", "new": "expense"})
    grown = run_of("a.jsonl")
    write_suite(tmp_path / "a.jsonl", {"echo": "expense", "other": "expense", "more": "expense"})
    changed = run_of("a.jsonl")
    said = " ".join(farm("report", "results").output.split())  # the last two: grown and changed
    assert f"Run {grown.name} and run {changed.name} are compared on the 1 case both ran (the same suite and case id), leaving out 3 cases that only one of them ran." in said
    assert f"{grown.name} -> {changed.name}, on the 1 case both ran" in said


def test_version_names_the_farm_python_and_ray_and_exits_0():
    import platform

    import farm as farm_package

    result = farm("--version")
    assert result.exit_code == 0
    assert result.output.startswith(f"agent-test-farm {farm_package.__version__} (Python {platform.python_version()}, Ray ")


def test_init_writes_a_starter_that_runs_green_offline_and_never_overwrites(tmp_path: Path, monkeypatch):
    import sys

    project = tmp_path / "starter"
    result = farm("init", str(project))
    assert result.exit_code == 0, result.output
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == ["farm.toml", "shop.py", "suites/starter.jsonl"]
    assert result.output.splitlines()[-1] == f"next: cd {project} && farm test -i suites/starter.jsonl"
    monkeypatch.chdir(project)
    monkeypatch.delitem(sys.modules, "shop", raising=False)
    run = farm("test", "-i", "suites/starter.jsonl", "--engine", "local")
    assert run.exit_code == 0, run.output
    (results,) = (project / "farm-results").glob("*/results.jsonl")
    statuses = {r["id"]: (r["status"], r["mode"]) for r in map(json.loads, results.read_text().splitlines())}
    assert statuses == {"greets": ("passed", "single"), "prices-then-order": ("passed", "static"), "buys-cheese": ("passed", "dynamic")}
    (project / "shop.py").write_text("# mine\n")
    again = farm("init", str(project))
    assert again.exit_code == 2
    assert f"farm init: {project / 'farm.toml'} exists; the farm writes no file over one (choose another DIR)" in again.output
    assert (project / "shop.py").read_text() == "# mine\n"  # nothing written before the refusal
