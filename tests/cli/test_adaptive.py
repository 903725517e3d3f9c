"""Adaptive repeats (``--runs auto``, ``--runs MIN..MAX``) on both engines, against agents behind a
real HTTP server on 127.0.0.1: each case stops once its pass rate is decided against the gate, its
last result says why, the gate follows the decision, and ``--resume`` goes on with undecided cases."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.writers import read_run_json


class Patterned:
    """Answers "right" or "wrong" by the message and how often it came: ``always`` right,
    ``never`` right, ``alternate``: right on every other request (the first one right)."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict, headers: dict[str, str]) -> Response:
        text = body["messages"][-1]["content"]
        with self._lock:
            self.seen[text] += 1
            count = self.seen[text]
        right = text.startswith("always") or (text.startswith("alternate") and count % 2 == 1)
        return Response(chat_completion("right" if right else "wrong"))

    def calls(self, project: Path) -> int:
        return sum(n for text, n in self.seen.items() if text.endswith(project.name))


@pytest.fixture(scope="module")
def agent():
    handler = Patterned()
    with JSONServer(handler) as server:
        handler.url = server.url  # type: ignore[attr-defined]
        yield handler


@pytest.fixture
def project(tmp_path: Path, agent: Patterned, engine: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    toml = f'[farm]\ndefault_agent = "bot"\nresults_dir = "results"\nengine = "{engine}"\n\n'
    toml += f'[connectors.bot]\nbase_url = "{agent.url}/v1"\nmodel = "m"\n\n[agents.bot]\nkind = "openai"\nconnector = "bot"\n'  # type: ignore[attr-defined]
    (tmp_path / "farm.toml").write_text(toml)
    cases = [
        {"id": kind, "input": f"{kind} {tmp_path.name}", "assertions": [{"type": "contains", "value": "right"}]}
        for kind in ("always", "never", "alternate")
    ]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def last_tries(run_dir: Path) -> dict[str, dict]:
    """Each case's last result (the one that says why it stopped), and that no case says it twice."""
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    stopped = [row for row in rows if row["stopped"] is not None]
    assert len(stopped) == len({row["id"] for row in stopped})
    assert sorted(row["run_index"] for row in rows if row["id"] == "never") == list(range(3))  # each try once
    return {row["id"]: {**row, "all": sum(r["id"] == row["id"] for r in rows)} for row in stopped}


def test_each_case_stops_once_decided_and_the_gate_follows_the_decision(project: Path, agent: Patterned):
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--runs", "2..10", "--min-pass-rate", "0.8", "-q"])
    assert result.exit_code == 1, result.output
    [run_dir] = (project / "results").iterdir()
    last = last_tries(run_dir)
    # always: 8 of 8 meet 0.8 over 10 tries; never: 0 of 3 cannot; alternate: its third failure in 6
    assert {case: (row["stopped"], row["tries"], row["verdict"], row["all"]) for case, row in last.items()} == {
        "always": ("decided_above", 8, "above", 8),
        "never": ("decided_below", 3, "below", 3),
        "alternate": ("decided_below", 6, "below", 6),
    }
    assert agent.calls(project) == 17  # of the 30 that --runs 10 sends
    said = " ".join(result.output.split())
    assert "never: below the 0.8 gate: 0 of 3 (stopped after 3 tries: below the gate)" in said
    assert "Adaptive repeats: 17 tries in all; 1 decided above the gate, 2 below, 0 undecided at the most tries." in said
    info = read_run_json(run_dir)
    assert info.options.adaptive_runs == "2..10" and info.options.alpha == 0.05 and info.options.delta == 0.1
    assert info.gate is not None and (info.gate.verdict, info.gate.cases, info.gate.below) == ("failed", 3, 2)
    assert info.gate.stopped is None  # no case run is missing: the undone tries were never due


def test_a_resume_goes_on_with_the_undecided_cases_only(project: Path, agent: Patterned):
    first = farm.run("suite.jsonl", runs="2..10", min_pass_rate=0.8, quiet=True)
    jsonl = first.run_dir / "results.jsonl"
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    kept = [row for row in rows if row["id"] == "never" or row["run_index"] < 2]  # as if stopped after the least tries
    for row in kept:
        if row["id"] != "never":
            row.update(stopped=None, tries=None, verdict=None)
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in kept))
    calls = agent.calls(project)
    again = farm.run(resume=first.run_dir, quiet=True)
    assert again.exit_code == 1
    last = last_tries(first.run_dir)
    assert {case: (row["stopped"], row["all"]) for case, row in last.items()} == {
        "always": ("decided_above", 8), "never": ("decided_below", 3), "alternate": ("decided_below", 6),
    }  # fmt: skip
    assert agent.calls(project) - calls == 6 + 4  # never: nothing more
    assert read_run_json(first.run_dir).options.adaptive_runs == "2..10"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "auto"], "--runs 2..10: adaptive repeats decide against the gate; give --min-pass-rate R (e.g. 0.8)"),
        (["--runs", "3..2", "--min-pass-rate", "0.8"], "--runs 3..2: the least tries (3) must be below the most (2)"),
        (["--runs", "auto", "--min-pass-rate", "0.8", "--alpha", "0.7"], "--alpha: 0.7 is not between 0 and 0.5"),
    ],
)
def test_bad_adaptive_options_are_one_sentence_and_call_no_agent(project: Path, agent: Patterned, args: list[str], said: str):
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", *args])
    assert result.exit_code == 2
    assert said in " ".join(result.output.split())
    assert agent.calls(project) == 0 and not (project / "results").exists()


def test_a_baseline_comparison_pairs_adaptive_tries_by_their_unbiased_estimates(project: Path, agent: Patterned):
    fixed = farm.run("suite.jsonl", runs=10, min_pass_rate=0.8, quiet=True)
    adaptive = farm.run("suite.jsonl", runs="auto", min_pass_rate=0.8, baseline=str(fixed.run_dir), quiet=True)
    gate = read_run_json(adaptive.run_dir).gate
    assert gate is not None and gate.baseline_run_id == fixed.run_dir.name
    [comparison] = gate.comparisons
    assert comparison.test == "paired t of unbiased estimates (adaptive repeats)" and comparison.cases == 3
    assert not comparison.worse and abs(comparison.difference) < 0.1


def test_the_report_the_viewer_and_the_gate_compare_adaptive_runs_alike(project: Path, agent: Patterned):
    """Each paired comparison of two runs counts a case adaptive repeats stopped by its unbiased estimate,
    so that ``farm report``, the viewer's compare page and ``--baseline`` never disagree on two runs."""
    from farm.reports.analysis import analyse
    from farm.reports.stats import ESTIMATES_TEST, paired_difference
    from farm.results import read_run
    from farm.view.cases import RunCases
    from farm.view.compare import Comparisons, Side

    # alternate passes every other request: 2 of 3 here, so the next run's tries start on a failure
    fixed = farm.run("suite.jsonl", runs=3, min_pass_rate=0.8, quiet=True)
    first = farm.run("suite.jsonl", runs="auto", min_pass_rate=0.8, baseline=str(fixed.run_dir), quiet=True)
    second = farm.run("suite.jsonl", runs="auto", min_pass_rate=0.8, baseline=str(first.run_dir), quiet=True)
    assert (last_tries(first.run_dir)["alternate"]["tries"], last_tries(second.run_dir)["alternate"]["tries"]) == (5, 6)
    for base, head in ((fixed, first), (first, second)):
        gate = read_run_json(head.run_dir).gate
        assert gate is not None
        [by_gate] = gate.comparisons
        [by_report] = analyse([base.run_dir, head.run_dir]).comparisons
        by_view = Comparisons(RunCases()).page(Side(read_run(base.run_dir)), Side(read_run(head.run_dir)))["statistics"]
        assert by_report.test == by_gate.test == by_view["test"] == ESTIMATES_TEST
        assert by_report.cases == by_gate.cases == by_view["paired"] == 3
        assert by_report.difference == by_gate.difference == by_view["difference"]
        assert list(by_report.difference_interval) == by_gate.difference_interval == by_view["difference_interval"]
        assert by_report.p_value == by_gate.p_value == by_view["p_value"] and not by_report.significant
        for sentence in (by_gate.sentence, by_report.sentence, by_view["sentence"]):
            assert "by each case's unbiased estimate of its pass rate under adaptive repeats" in sentence
            assert "not significant: this could be noise" in sentence
    # fixed 2 of 3 against adaptive 2 of 5, which the stop biases low: estimated 0.5, not 0.4
    [alternate] = analyse([fixed.run_dir, first.run_dir]).comparisons[0].worse
    assert (alternate.a_passes, alternate.a_tries, alternate.a_estimate) == (2, 3, None)
    assert (alternate.b_passes, alternate.b_tries, alternate.b_estimate) == (2, 5, 0.5)
    fractions = paired_difference([((3, 3), (8, 8)), ((0, 3), (0, 3)), ((2, 3), (2, 5))]).difference
    estimated = analyse([fixed.run_dir, first.run_dir]).comparisons[0].difference
    assert estimated == pytest.approx((0.5 - 2 / 3) / 3) and estimated != pytest.approx(fractions)
    said = " ".join(CliRunner().invoke(app, ["report", str(fixed.run_dir), str(first.run_dir)]).output.split())
    assert "t, est.: the paired t test of each case's unbiased estimate under adaptive repeats" in said
    assert "alternate 2/3 2/5 (est. 50%)" in said


def test_a_run_stopped_early_counts_as_not_run_only_the_tries_that_were_due(project: Path, agent: Patterned):
    args = ["test", "-i", "suite.jsonl", "--runs", "auto", "--min-pass-rate", "0.8", "--fail-fast", "--parallel", "1", "-q"]
    assert CliRunner().invoke(app, args).exit_code == 1
    [run_dir] = (project / "results").iterdir()
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert [(row["id"], row["run_index"], row["status"]) for row in rows] == [
        ("always", 0, "passed"), ("always", 1, "passed"), ("never", 0, "failed"),
    ]  # fmt: skip
    # due: always's next try, never's second first try, alternate's two first tries (not 30 - 3)
    gate = read_run_json(run_dir).gate
    assert gate is not None and (gate.stopped, gate.not_run) == ("fail_fast", 4)
    assert "the run stopped early at its first failure (--fail-fast): 4 case runs not run" in gate.sentence
    report = " ".join(CliRunner().invoke(app, ["report", str(run_dir)]).output.split())
    assert "is stopped: 4 tries that were due did not run (adaptive repeats); its figures are of the 3 that did." in report
    markdown = CliRunner().invoke(app, ["report", "--format", "md", str(run_dir)]).output
    assert "4 case runs not run" in markdown


def test_a_finished_adaptive_run_has_nothing_not_run(project: Path, agent: Patterned):
    done = farm.run("suite.jsonl", runs="auto", min_pass_rate=0.8, quiet=True)
    gate = read_run_json(done.run_dir).gate
    assert gate is not None and (gate.stopped, gate.not_run) == (None, 0)
    report = " ".join(CliRunner().invoke(app, ["report", str(done.run_dir)]).output.split())
    assert "did not run" not in report and "stopped early" not in report


def test_every_report_says_where_each_case_stopped(project: Path, agent: Patterned, monkeypatch: pytest.MonkeyPatch):
    import xml.etree.ElementTree as ET

    from farm.view import ViewApp, ViewServer
    from tests.farm.view.test_server import get_json

    step_summary = project / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    runner = CliRunner()
    result = runner.invoke(
        app, ["test", "-i", "suite.jsonl", "--runs", "auto", "--min-pass-rate", "0.8", "-q", "--junit", "junit.xml"]
    )
    assert result.exit_code == 1, result.output
    [run_dir] = (project / "results").iterdir()

    markdown = step_summary.read_text()
    assert "### Adaptive repeats" in markdown
    assert "Adaptive repeats: 17 tries in all; 1 decided above the gate, 2 below, 0 undecided at the most tries." in markdown
    assert "| bot | always | 8 of 8 | stopped after 8 tries: above the gate |" in markdown
    assert "| bot | never | 0 of 3 | stopped after 3 tries: below the gate |" in markdown
    assert runner.invoke(app, ["report", "--format", "md", str(run_dir)]).output.strip() == markdown.strip()

    cases = {case.get("name"): case for case in ET.parse(project / "junit.xml").getroot().findall(".//testcase")}
    always = cases["always"]
    assert {p.get("name"): p.get("value") for p in always.iter("property")}["stopped"] == "decided_above"
    assert always.find("failure") is None and always.findtext("system-out").startswith(
        "stopped after 8 tries: above the gate; passed 8 of 8 tries"
    )
    never = cases["never"].find("failure")
    assert never is not None and never.get("message", "").startswith("stopped after 3 tries: below the gate")

    report = runner.invoke(app, ["report", str(run_dir)])
    said = " ".join(report.output.split())
    assert "Adaptive repeats: 3 cases (below their gate first)" in said
    assert "never: stopped after 3 tries: below the gate" in said and "always: stopped after 8 tries: above the gate" in said
    as_json = json.loads(runner.invoke(app, ["report", "--json", str(run_dir)]).output)
    assert {row["case_id"]: row["said"] for row in as_json["adaptive"]}["alternate"] == "stopped after 6 tries: below the gate"

    server = ViewServer(ViewApp(str(project / "results")))
    server.start()
    try:
        assert get_json(server, f"/api/runs/{run_dir.name}/cases/always")["stopped"] == "stopped after 8 tries: above the gate"
    finally:
        server.shutdown()
        server.server_close()
