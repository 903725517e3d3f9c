"""The CI gate, on both engines, against agents behind a real HTTP server on 127.0.0.1:
``--min-pass-rate`` over ``--runs``, ``--baseline`` (a run folder or ``last``), the gate in
``run.json``, the console and ``$GITHUB_STEP_SUMMARY``, JUnit once per case, and
``--resume --retry-errors``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import UsageError
from farm.writers import read_run_json


class Noisy:
    """Agents that answer "right" or "wrong", counting requests per agent and message:

    - ``/weak/``: always "wrong";
    - ``flaky <tag>``: "wrong" on every fifth request with that text, so 5 tries pass 4;
    - ``broken <tag>``: always "wrong";
    - ``down once <tag>``: the first request is refused (400, not retried), the next ones "right";
    - ``slow <tag>``: "right" after 0.3 s;
    - anything else: "right".
    """

    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict, headers: dict[str, str]) -> Response:
        text = body["messages"][-1]["content"]
        weak = "/weak/" in path
        with self._lock:
            self.seen[path, text] += 1
            count = self.seen[path, text]
        if text.startswith("down once") and count == 1:
            return Response({"error": {"message": "down for maintenance"}}, status=400)
        wrong = weak or text.startswith("broken") or (text.startswith("flaky") and count % 5 == 0)
        return Response(chat_completion("wrong" if wrong else "right"), delay=0.3 if text.startswith("slow") else 0.0)


@pytest.fixture(scope="module")
def server():
    agent = Noisy()
    with JSONServer(agent) as server:
        yield server


TOML = """
[farm]
default_agent = "good"
results_dir = "results"
engine = "{engine}"

[connectors.good]
base_url = "{url}/good/v1"
model = "m"

[connectors.weak]
base_url = "{url}/weak/v1"
model = "m"

[agents.good]
kind = "openai"
connector = "good"

[agents.weak]
kind = "openai"
connector = "weak"
"""


@pytest.fixture
def project(tmp_path: Path, server, engine: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "farm.toml").write_text(TOML.format(url=server.url, engine=engine))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def suite(project: Path, *texts: str, name: str = "suite.jsonl") -> str:
    """A suite of one case per text, each passing when the reply says "right"."""
    cases = [
        {"id": f"c{i}", "input": f"{text} {project.name}", "assertions": [{"type": "contains", "value": "right"}]}
        for i, text in enumerate(texts)
    ]
    (project / name).write_text("".join(json.dumps(case) + "\n" for case in cases))
    return name


def test_flaky_cases_pass_a_gate_they_meet_and_fail_one_they_do_not(project: Path):
    path = suite(project, "flaky a", "flaky b", "flaky c")
    runner = CliRunner()
    met = runner.invoke(app, ["test", "-i", path, "--runs", "5", "--min-pass-rate", "0.8", "-q", "--junit", "junit.xml"])
    assert met.exit_code == 0, met.output
    assert "c0: flaky, passed the 0.8 gate: 4 of 5" in met.output
    last = met.output.strip().splitlines()[-1]
    assert last == "Gate: passed: all 3 cases passed their gate (the 0.8 gate), 3 of them flaky: failing some tries.", last
    run_dir = next((project / "results").iterdir())
    gate = read_run_json(run_dir).gate
    assert gate is not None and (gate.verdict, gate.min_pass_rate, gate.flaky, gate.below) == ("passed", 0.8, 3, 0)

    # JUnit: each case once, its pass rate a property, its failed try's message in system-out
    cases = ET.parse(project / "junit.xml").getroot().findall(".//testcase")
    assert sorted(case.get("name") for case in cases) == ["c0", "c1", "c2"]
    first = next(case for case in cases if case.get("name") == "c0")
    properties = {p.get("name"): p.get("value") for p in first.iter("property")}
    assert properties["pass_rate"] == "0.8" and properties["tries"] == "5"
    said = first.findtext("system-out")
    assert first.find("failure") is None and said.startswith("passed 4 of 5 tries")
    assert ': failed\n  turn 1: contains "right"' in said  # the failed try's message

    missed = runner.invoke(app, ["test", "-i", path, "--runs", "5", "--min-pass-rate", "0.9", "-q"])
    assert missed.exit_code == 1, missed.output
    assert "c1: below the 0.9 gate: 4 of 5" in missed.output
    assert missed.output.strip().splitlines()[-1].startswith("Gate: failed: 3 of 3 cases below their gate (the 0.9 gate")


def test_a_try_in_error_is_said_as_such_not_as_a_case_below_its_gate(project: Path):
    result = CliRunner().invoke(
        app, ["test", "-i", suite(project, "down once s", "ok t"), "--runs", "5", "--min-pass-rate", "0.8", "-q"]
    )
    assert result.exit_code == 1, result.output
    assert "c0: 1 of 5 tries ended in an error or a timeout (4 of 5 passed)" in result.output
    assert "below the 0.8 gate" not in result.output.replace("below their gate", "")


def test_a_case_failing_every_try_fails_any_gate(project: Path):
    path = suite(project, "flaky d", "broken e")
    result = farm.run(path, runs=5, min_pass_rate=0.01, quiet=True)
    assert result.exit_code == 1
    gate = read_run_json(result.run_dir).gate
    assert gate is not None and (gate.verdict, gate.below, gate.flaky) == ("failed", 1, 1)


def test_the_json_summary_event_carries_the_gate_and_its_exit_code(project: Path):
    path = suite(project, "flaky l")
    result = CliRunner().invoke(app, ["test", "-i", path, "--runs", "5", "--min-pass-rate", "0.8", "--json"])
    assert result.exit_code == 0
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["counts"]["failed"] == 1
    assert summary["exit_code"] == 0 and summary["gate"]["verdict"] == "passed" and summary["gate"]["flaky"] == 1


def test_a_weaker_agent_fails_against_the_baseline_and_the_same_agent_passes(project: Path, monkeypatch: pytest.MonkeyPatch):
    path = suite(project, *(f"ok {i}" for i in range(8)))
    first = farm.run(path, quiet=True)
    assert first.exit_code == 0
    step_summary = project / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))

    runner = CliRunner()
    weaker = runner.invoke(app, ["test", "-i", path, "-n", "weak", "--baseline", str(first.run_dir), "-q"])
    assert weaker.exit_code == 1, weaker.output
    [weaker_dir] = [run for run in (project / "results").iterdir() if run.name != first.run_id]
    gate = read_run_json(weaker_dir).gate
    assert gate is not None and gate.verdict == "failed" and gate.baseline_run_id == first.run_id
    [comparison] = gate.comparisons
    assert (comparison.agent, comparison.baseline_agent, comparison.cases, comparison.worse) == ("weak", "good", 8, True)
    assert comparison.difference == -1.0
    last = " ".join(weaker.output.split())  # the console wraps the long sentence
    assert "weak passes 100.0 percentage points less often than good in baseline run" in last
    assert "(95 % interval" in last and "significant at the 5 % level" in last
    markdown = step_summary.read_text()
    assert "gate failed" in markdown and "**significantly worse**" in markdown
    printed = runner.invoke(app, ["report", "--format", "md", str(weaker_dir)])
    assert printed.exit_code == 0 and printed.output + "\n" == markdown  # the same Markdown, for a PR comment

    same = runner.invoke(app, ["test", "-i", path, "--baseline", str(first.run_dir), "-q"])
    assert same.exit_code == 0, same.output
    assert "good passes as often as good in baseline run" in " ".join(same.output.split())
    assert step_summary.read_text().count("Agent Test Farm: gate") == 2  # appended, as GitHub wants it


def test_an_agent_the_baseline_did_not_test_is_not_compared_with_another(project: Path):
    path = suite(project, *(f"ok {i}" for i in range(8)))
    first = farm.run(path, quiet=True)
    both = CliRunner().invoke(app, ["test", "-i", path, "-n", "good", "-n", "weak", "--baseline", str(first.run_dir), "-q"])
    [both_dir] = [run for run in (project / "results").iterdir() if run.name != first.run_id]
    gate = read_run_json(both_dir).gate
    assert gate is not None and [(c.agent, c.baseline_agent, c.worse) for c in gate.comparisons] == [("good", "good", False)]
    said = " ".join(both.output.split())
    assert f"No baseline for weak: baseline run {first.run_id} tested good." in said and "weak passes" not in said
    assert gate.sentence.startswith("failed: 8 of 16 cases below their gate")  # weak's own failures, not a comparison


def test_an_interrupted_run_fails_its_gate_and_its_report_says_what_did_not_run(project: Path):
    path = suite(project, *(f"slow {i}" for i in range(20)))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "farm.cli", "test", "-i", path, "--parallel", "1"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and sum(len(p.read_text().splitlines()) for p in (project / "results").glob("*/results.jsonl")) < 3
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    [run_dir] = (project / "results").iterdir()
    ran = len((run_dir / "results.jsonl").read_text().splitlines())
    gate = read_run_json(run_dir).gate
    assert gate is not None and (gate.verdict, gate.stopped, gate.not_run) == ("failed", "interrupted", 20 - ran), output

    runner = CliRunner()
    markdown = runner.invoke(app, ["report", "--format", "md", str(run_dir)]).output
    assert markdown.startswith("## ❌ Agent Test Farm: gate failed") and "✅" not in markdown, markdown
    assert f"the run was interrupted: {20 - ran} case runs not run" in markdown
    text = " ".join(runner.invoke(app, ["report", str(run_dir)]).output.split())  # the report wraps to the terminal
    assert f"interrupted: {20 - ran} case runs not run" in text, text
    assert f"run {read_run_json(run_dir).run_id} is interrupted: {20 - ran} of 20 planned case runs did not run" in " ".join(
        text.split()
    )
    whole = json.loads(runner.invoke(app, ["report", "--json", str(run_dir)]).output)
    assert (whole["runs"][0]["status"], whole["runs"][0]["not_run"]) == ("interrupted", 20 - ran)


def test_baseline_last_finds_the_latest_finished_run_of_the_same_input(project: Path):
    path = suite(project, *(f"ok {i}" for i in range(8)))
    other = suite(project, *(f"ok {i}" for i in range(8)), name="other.jsonl")
    nothing_yet = farm.run(path, baseline="last", quiet=True)
    gate = read_run_json(nothing_yet.run_dir).gate
    assert nothing_yet.exit_code == 0 and gate is not None and gate.baseline is None
    assert "no earlier finished run of this input" in gate.sentence
    weak = farm.run(path, agent="weak", quiet=True)  # the latest run of this input
    farm.run(other, quiet=True)  # a later run, of another input
    latest = farm.run(path, baseline="last", quiet=True)
    gate = read_run_json(latest.run_dir).gate
    assert gate is not None and gate.baseline_run_id == weak.run_id
    assert gate.comparisons[0].difference == 1.0 and latest.exit_code == 0  # better than its baseline


@pytest.fixture
def local_project(tmp_path: Path, server, monkeypatch: pytest.MonkeyPatch) -> Path:
    """:func:`project` on the local engine only: what is paired with a baseline does not depend on the engine."""
    (tmp_path / "farm.toml").write_text(TOML.format(url=server.url, engine="local"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def test_a_baseline_of_another_suite_with_the_same_case_ids_is_not_compared(local_project: Path):
    other = farm.run(suite(local_project, *(f"ok {i}" for i in range(8)), name="other.jsonl"), quiet=True)
    path = suite(local_project, *(f"ok {i}" for i in range(8)))  # c0 to c7 again, of another suite
    with pytest.raises(UsageError, match=f"baseline run {other.run_id} ran none of the cases of this run's suite suite.jsonl"):
        farm.run(path, agent="weak", baseline=str(other.run_dir), quiet=True)  # refused before any call, not compared
    assert sorted(p.name for p in (local_project / "results").iterdir()) == [other.run_id]


def test_a_baseline_pairs_the_same_suite_however_it_was_named_and_says_what_it_left_out(local_project: Path):
    path = suite(local_project, *(f"ok {i}" for i in range(8)))
    first = farm.run(path, quiet=True)
    by_path = farm.run(str(local_project / path), agent="weak", baseline=str(first.run_dir), quiet=True)
    gate = read_run_json(by_path.run_dir).gate
    assert gate is not None and [(c.cases, c.left_out, c.worse) for c in gate.comparisons] == [(8, 0, True)]
    suite(local_project, *(f"ok {i}" for i in range(4)), name=path)  # c0 to c3 of the same file: 4 cases fewer
    fewer = farm.run(path, baseline=str(first.run_dir), quiet=True)
    gate = read_run_json(fewer.run_dir).gate
    assert gate is not None and [(c.cases, c.left_out) for c in gate.comparisons] == [(4, 4)]
    assert gate.sentence.startswith(
        f"passed: all 4 cases passed their gate (every try must pass). Baseline run {first.run_id} and this run are compared "
        "on the 4 cases both ran (the same suite and case id), leaving out 4 cases that only one of them ran. good passes as often"
    )


def test_a_case_of_one_suite_failing_every_try_fails_the_gate_whatever_another_suites_case_of_its_id_did(local_project: Path):
    a = suite(local_project, "ok a", name="a.jsonl")  # c0, passing every try
    b = suite(local_project, "broken b", name="b.jsonl")  # c0 again, failing every try
    step_summary = local_project / "summary.md"
    args = ["test", "-q", "-i", a, "-i", b, "--runs", "2", "--min-pass-rate", "1.0"]
    result = CliRunner().invoke(app, args, env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert result.exit_code == 1, result.output
    assert "  c0 (b.jsonl): below the 1 gate: 0 of 2" in result.output and "c0 (a.jsonl)" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "Gate: failed: 1 of 2 cases below their gate (every try must pass; an error or a timeout fails it).", last
    gate = read_run_json(next((local_project / "results").iterdir())).gate
    assert gate is not None and (gate.verdict, gate.cases, gate.below) == ("failed", 2, 1)
    assert "| good | c0 (b.jsonl) | 0 of 2 | 0 |" in step_summary.read_text().splitlines()


def test_retry_errors_runs_the_errors_again_and_keeps_every_case_once(project: Path):
    path = suite(project, "down once f", "ok g", "down once h")
    first = farm.run(path, quiet=True)
    assert first.exit_code == 1
    statuses = {row["id"]: row["status"] for row in map(json.loads, first.results.read_text().splitlines())}
    assert statuses == {"c0": "error", "c1": "passed", "c2": "error"}

    again = farm.run(resume=first.run_dir, retry_errors=True, quiet=True)
    assert again.exit_code == 0
    rows = [json.loads(line) for line in first.results.read_text().splitlines()]
    assert sorted((row["id"], row["status"]) for row in rows) == [("c0", "passed"), ("c1", "passed"), ("c2", "passed")]
    table = pq.read_table(first.run_dir / "cases.parquet", columns=["case_id", "status"]).to_pydict()
    assert sorted(zip(table["case_id"], table["status"], strict=True)) == [("c0", "passed"), ("c1", "passed"), ("c2", "passed")]
    assert read_run_json(first.run_dir).counts["passed"] == 3


def test_gate_options_that_cannot_be_are_usage_errors(project: Path):
    path = suite(project, "ok i")
    runner = CliRunner()
    for args, said in (
        (["--min-pass-rate", "1.5"], "--min-pass-rate: 1.5 is not a share of tries"),
        (["--baseline", "nowhere"], "--baseline: nowhere is not a run folder"),
        (["--retry-errors"], "--retry-errors: give it with --resume RUN_DIR"),
    ):
        result = runner.invoke(app, ["test", "-i", path, *args])
        assert result.exit_code == 2, result.output
        assert said in result.output and "Traceback" not in result.output
    toml = project / "farm.toml"
    toml.write_text(toml.read_text().replace("[farm]\n", "[farm]\nmin_pass_rate = 0\n", 1))
    result = runner.invoke(app, ["test", "-i", path])
    assert result.exit_code == 2 and "farm.toml:3: key 'min_pass_rate': 0 is not a share of tries" in result.output
    assert not (project / "results").exists() or not any((project / "results").iterdir())


def test_report_format_md_prints_the_latest_finished_run_of_a_results_folder(project: Path):
    path = suite(project, "ok j", "broken k")
    farm.run(path, quiet=True)
    latest = farm.run(path, agent="weak", quiet=True)
    runner = CliRunner()
    printed = runner.invoke(app, ["report", "--format", "md", "results"])
    assert printed.exit_code == 0, printed.output
    assert printed.output.startswith("## ❌ Agent Test Farm: gate failed") and f"run `{latest.run_id}`" in printed.output
    assert "| weak | 2 | 0 | 2 | 0 | 0.0% |" in printed.output
    wrong = runner.invoke(app, ["report", "--format", "mdx", "results"])
    assert wrong.exit_code == 2 and "--format: 'mdx' is not one of: table, json, md" in wrong.output


def test_a_step_summary_that_cannot_be_written_is_said_and_fails_the_run(project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project))  # a folder: no file to append to
    result = CliRunner().invoke(app, ["test", "-i", suite(project, "ok m")])
    assert result.exit_code == 1 and "error: cannot append the summary to $GITHUB_STEP_SUMMARY" in result.output
    assert "Traceback" not in result.output
