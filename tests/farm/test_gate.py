"""The gate's decisions from per-case tallies (no run), its Markdown summary, and ``--retry-errors``'
rewrite of the results JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm._run.gating import gate_lines
from farm.errors import UsageError
from farm.gate import Baseline, CaseTally, check_min_pass_rate, compare, find_baseline, judge, tally
from farm.reports.markdown import FAILING_ROWS, gate_markdown
from farm.results._folder import finished_keys
from farm.writers import RunInfo, write_run_json
from farm.writers.jsonl import drop_broken


def rows(agent: str, case_id: str, *statuses: str, role: str | None = None) -> list[tuple[str, str, str, str | None]]:
    return [(agent, case_id, status, role if status == "error" else None) for status in statuses]


def test_a_roles_error_fails_the_gate_but_is_not_one_of_the_agents_tries():
    tallies = tally(
        [*rows("a", "c1", "passed", "passed", "error", role="simulator"), *rows("a", "c2", "error", role="validator")]
    )
    c1, c2 = tallies["a"]["", "c1"], tallies["a"]["", "c2"]
    assert (c1.passes, c1.tries, c1.broken) == (2, 2, 1) and not c1.passes_gate(0.5)
    assert (c2.tries, c2.broken) == (0, 1) and not c2.passes_gate(0.5)
    before = Baseline(Path("b"), "run-b", tally(rows("a", "c2", "passed")), Path("now"))
    (compared,) = compare(tallies, before)
    assert compared.cases == 0  # c2 was judged by no agent try in this run: it is not paired


def test_a_case_passes_its_gate_with_at_least_that_share_of_its_tries():
    four_of_five = CaseTally(passes=4, tries=5)
    assert four_of_five.passes_gate(0.8) and not four_of_five.passes_gate(0.9) and not four_of_five.passes_gate(1.0)
    assert CaseTally(passes=7, tries=10).passes_gate(0.7)  # 0.7 * 10 is 7.000000000000001 in floating point
    assert not CaseTally(passes=0, tries=5).passes_gate(0.01)
    assert not CaseTally(passes=4, tries=5, broken=1).passes_gate(0.5)  # an error fails any gate


def test_tallies_leave_skipped_tries_out_and_count_errors():
    tallies = tally([*rows("a", "c1", "passed", "skipped", "failed"), *rows("a", "c2", "skipped"), *rows("b", "c1", "timeout")])
    assert tallies["a"]["", "c1"] == CaseTally(passes=1, tries=2, broken=0)
    assert ("", "c2") not in tallies["a"]
    assert tallies["b"]["", "c1"] == CaseTally(passes=0, tries=1, broken=1)


def test_the_verdict_and_its_sentence():
    tallies = tally([*rows("a", "c1", "passed", "passed", "passed", "passed", "failed"), *rows("a", "c2", *["passed"] * 5)])
    passed = judge(tallies, 0.8)
    assert (passed.verdict, passed.below, passed.flaky, passed.cases) == ("passed", 0, 1, 2)
    assert passed.sentence == "passed: all 2 cases passed their gate (the 0.8 gate), 1 of them flaky: failing some tries."
    failed = judge(tallies, 1.0)
    assert failed.verdict == "failed" and failed.sentence.startswith("failed: 1 of 2 cases below their gate (every try must pass")


def test_only_a_significantly_worse_agent_fails_against_the_baseline():
    before = tally(rows("a", f"c{i}", "passed")[0] for i in range(8))
    baseline = Baseline(Path("b"), "run-b", before, Path("now"))
    worse = judge(tally(rows("a", f"c{i}", "failed" if i < 7 else "passed")[0] for i in range(8)), 0.01, baseline)
    [comparison] = worse.comparisons
    assert comparison.worse and worse.verdict == "failed"  # 7 of 8 lost: McNemar p = 2/128
    assert comparison.p_value == pytest.approx(2 / 2**7)
    assert "a passes 87.5 percentage points less often than a in baseline run run-b" in worse.sentence
    assert "significant at the 5 % level" in worse.sentence
    slightly = judge(tally(rows("a", f"c{i}", "failed" if i < 1 else "passed")[0] for i in range(8)), 0.01, baseline)
    assert not slightly.comparisons[0].worse and slightly.below == 1  # failed for its case, not for the baseline
    assert "not significant: this could be noise" in slightly.sentence


def test_several_agents_are_compared_each_with_its_own_and_holm_adjusted():
    def judged(cases: int):
        before = tally([rows(agent, f"c{i}", "passed")[0] for agent in ("a", "b") for i in range(cases)])
        now = tally([rows(agent, f"c{i}", "failed")[0] for agent in ("a", "b") for i in range(cases)])
        return judge(now, 0.01, Baseline(Path("b"), "run-b", before, Path("now")))

    gate = judged(8)
    assert [(c.agent, c.baseline_agent) for c in gate.comparisons] == [("a", "a"), ("b", "b")]
    assert [c.p_adjusted for c in gate.comparisons] == [pytest.approx(2 * 2 / 2**8)] * 2
    assert all(c.worse for c in gate.comparisons) and "Holm-adjusted" in gate.sentence
    # with 6 cases each p = 0.031 is below 5 %, but not once adjusted for comparing two agents
    gate = judged(6)
    assert [c.p_value for c in gate.comparisons] == [pytest.approx(2 / 2**6)] * 2
    assert not any(c.worse for c in gate.comparisons)


def test_a_baseline_of_other_agents_is_said_to_compare_nothing():
    before = tally([rows(agent, "c1", "passed")[0] for agent in ("x", "y")])
    gate = judge(tally(rows("a", "c1", "passed")), 1.0, Baseline(Path("b"), "run-b", before, Path("now")))
    assert gate.verdict == "passed" and gate.comparisons == []
    assert gate.sentence.endswith("No comparison: baseline run run-b tested x, y, none of this run's agents.")


def test_a_new_agent_has_no_baseline_in_a_run_of_another_agent():
    before = tally(rows("a", f"c{i}", "passed")[0] for i in range(8))
    now = tally(
        [row for i in range(8) for row in (*rows("a", f"c{i}", "passed"), *rows("b", f"c{i}", "passed", *["failed"] * 4))]
    )
    gate = judge(now, 0.01, Baseline(Path("b"), "run-b", before, Path("now")))
    assert [(c.agent, c.baseline_agent) for c in gate.comparisons] == [("a", "a")]  # b is not held to a's run
    assert gate.verdict == "passed" and gate.sentence.endswith("No baseline for b: baseline run run-b tested a.")
    renamed = judge(tally(rows("b", "c1", "passed")), 1.0, Baseline(Path("b"), "run-b", before, Path("now")))
    assert [(c.agent, c.baseline_agent) for c in renamed.comparisons] == [("b", "a")]  # one agent each: renamed


def test_a_gate_failed_against_the_baseline_says_so_first():
    baseline = Baseline(Path("b"), "run-b", tally(rows("a", f"c{i}", *["passed"] * 5)[0] for i in range(20)), Path("now"))
    now = tally(
        row for i in range(20) for row in rows("a", f"c{i}", *(["passed"] * 2 + ["failed"] * 3 if i < 9 else ["passed"] * 5))
    )
    gate = judge(now, 0.2, baseline)
    assert gate.below == 0 and gate.comparisons[0].worse
    assert gate.sentence.startswith(
        "failed: a significantly worse than baseline run run-b; all 20 cases passed their gate (the 0.2 gate)"
    )


def test_a_run_that_stopped_early_fails_its_gate_saying_what_did_not_run():
    gate = judge(tally(rows("a", f"c{i}", "passed")[0] for i in range(3)), 1.0, stopped="max_cost", not_run=7)
    assert (gate.verdict, gate.stopped, gate.not_run) == ("failed", "max_cost", 7)
    assert (
        gate.sentence
        == "failed: the run stopped early, its --max-cost budget spent: 7 case runs not run; all 3 cases passed their gate (every try must pass)."
    )
    one = judge(tally(rows("a", "c1", "passed")), 1.0, stopped="interrupted", not_run=1)
    assert one.sentence.startswith("failed: the run was interrupted: 1 case run not run;")


def test_min_pass_rate_must_be_a_share_of_tries():
    assert check_min_pass_rate(0.8) == 0.8 and check_min_pass_rate(1.0) == 1.0
    assert check_min_pass_rate("0.5") == 0.5  # as the command line gives it
    for bad, shown in ((0.0, "0"), (1.2, "1.2"), (-0.5, "-0.5"), ("abc", "abc"), ("nan", "nan")):
        with pytest.raises(UsageError, match=f"--min-pass-rate: {shown} is not a share of tries"):
            check_min_pass_rate(bad)


def test_baseline_last_is_the_latest_finished_run_of_the_same_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    results = tmp_path / "results"
    for run_id, status, started, input in (
        ("r1", "finished", 1.0, "suite.jsonl"),
        ("r2", "finished", 2.0, str(tmp_path / "suite.jsonl")),  # the same file, named from elsewhere
        ("r3", "interrupted", 3.0, "suite.jsonl"),
        ("r4", "finished", 4.0, "other.jsonl"),
    ):
        write_run_json(
            results / run_id, RunInfo(run_id=run_id, status=status, started_at=started, input=input, cwd=str(tmp_path))
        )
    assert find_baseline("last", results, "suite.jsonl") == results / "r2"
    assert find_baseline("last", results, "suite.jsonl", exclude=results / "r2") == results / "r1"
    assert find_baseline("last", results, "new.jsonl") is None
    with pytest.raises(UsageError, match="--baseline: r1 is not a run folder"):
        find_baseline("r1", results, "suite.jsonl")  # relative to here, not to the results folder


def test_the_markdown_summary_has_the_verdict_a_row_per_agent_and_the_failing_cases():
    statuses = [*rows("a|1", "c<b>", "passed", "failed"), *rows("b", "ok", "passed", "passed")]
    statuses += [row for i in range(FAILING_ROWS + 3) for row in rows("b", f"bad{i:02}", "failed", "failed")]
    tallies = tally(statuses)
    text = gate_markdown(RunInfo(run_id="r9"), judge(tallies, 0.5), tallies)
    lines = text.splitlines()
    assert lines[0] == "## ❌ Agent Test Farm: gate failed"
    header = lines.index("| Agent | Cases | Passed their gate | Tries | Passed tries | Pass rate | 95 % interval |")
    assert lines[header + 1] == "|---|--:|--:|--:|--:|--:|---|"
    assert lines[header + 2].startswith("| a\\|1 | 1 | 1 | 2 | 1 | 50.0% | ")  # the agent's | does not end the cell
    assert lines[header + 3].startswith(f"| b | {FAILING_ROWS + 4} | 1 | {2 * FAILING_ROWS + 8} | 2 | ")
    assert f"### Cases that failed their gate ({FAILING_ROWS + 3})" in lines
    assert sum(line.startswith("| b | bad") for line in lines) == FAILING_ROWS and lines[-1] == "… and 3 more."
    assert "&lt;b&gt;" not in text  # c<b> passed its 0.5 gate: not listed
    for line in lines:
        if line.startswith("|"):
            assert line.endswith("|") and line.replace("\\|", "").count("|") in (5, 8)  # every row has its cells


def test_the_markdown_summary_lists_a_case_whose_only_tries_were_a_roles_errors():
    tallies = tally([*rows("a", "sim-broke", "error", "error", role="simulator"), *rows("a", "bad", "failed")])
    assert tallies["a"]["", "sim-broke"].tries == 0  # a role's error is no try of the agent's
    lines = gate_markdown(RunInfo(run_id="r9"), judge(tallies, 1.0), tallies).splitlines()
    assert "### Cases that failed their gate (2)" in lines
    assert [line.split(" | ")[1] for line in lines if line.startswith("| a | ")][-2:] == ["bad", "sim-broke"]


def in_suite(suite: str, agent: str, case_id: str, *statuses: str) -> list[tuple[str, str, str, None, str]]:
    """Case runs of ``case_id`` read from the suite file ``suite`` (their ``source``, a line of it)."""
    return [(agent, case_id, status, None, f"{suite}:1") for status in statuses]


def test_two_suites_case_of_one_id_are_two_cases_each_with_its_gate():
    tallies = tally(
        [*in_suite("a.jsonl", "x", "greet", "passed", "passed"), *in_suite("b.jsonl", "x", "greet", "failed", "failed")]
    )
    assert tallies["x"] == {
        ("a.jsonl", "greet"): CaseTally(2, 2, source="a.jsonl:1"),
        ("b.jsonl", "greet"): CaseTally(0, 2, source="b.jsonl:1"),
    }
    gate = judge(tallies, 1.0)
    assert (gate.verdict, gate.cases, gate.below) == ("failed", 2, 1)
    lines = [str(line) for line in gate_lines(gate, tallies)]
    assert lines == ["  greet (b.jsonl): below the 1 gate: 0 of 2", f"Gate: {gate.sentence}"]  # b's, not a's nor both
    failing = gate_markdown(RunInfo(run_id="r1"), gate, tallies).splitlines()
    assert "### Cases that failed their gate (1)" in failing and "| x | greet (b.jsonl) | 0 of 2 | 0 |" in failing


def test_a_case_failing_its_gate_in_one_suite_is_not_passed_by_another_suites_case_of_its_id():
    # 3 passes of 4 would meet a 0.7 gate; b's greet alone, 1 of 2, does not
    tallies = tally(
        [*in_suite("a.jsonl", "x", "greet", "passed", "passed"), *in_suite("b.jsonl", "x", "greet", "passed", "failed")]
    )
    gate = judge(tallies, 0.7)
    assert (gate.verdict, gate.cases, gate.below, gate.flaky) == ("failed", 2, 1, 0)
    # and a flaky case is flaky in its own suite: 2 of 4 would be one flaky case passing a 0.5 gate
    flaky = tally(
        [*in_suite("a.jsonl", "x", "greet", "failed", "failed"), *in_suite("b.jsonl", "x", "greet", "passed", "passed")]
    )
    assert (judge(flaky, 0.5).verdict, judge(flaky, 0.5).flaky) == ("failed", 0)


def test_a_run_of_one_suite_names_its_cases_by_id_alone():
    tallies = tally(in_suite("a.jsonl", "x", "greet", "passed", "failed"))
    assert [str(line) for line in gate_lines(judge(tallies, 1.0), tallies)][0] == "  greet: below the 1 gate: 1 of 2"


def test_retry_errors_drops_the_errors_and_timeouts_from_the_jsonl(tmp_path: Path):
    path = tmp_path / "results.jsonl"
    records = [
        {"id": "a", "status": "passed"},
        {"id": "b", "status": "error"},
        {"id": "c", "status": "timeout"},
        {"id": "d", "status": "failed"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"id": "e", "sta')  # a torn last line
    assert drop_broken(path) == 3
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "d"]
    assert finished_keys(path) == {("", "a", 0, ""), ("", "d", 0, "")}


def test_junit_writes_a_repeated_case_once_failing_below_its_gate_and_erring_on_an_error(tmp_path: Path):
    import xml.etree.ElementTree as ET

    from farm.reports.junit import JUnitWriter
    from farm.results import Status
    from tests.factories import case_result

    path = tmp_path / "junit.xml"
    writer = JUnitWriter(path, "r1", runs=3, min_pass_rate=0.6)
    tries = {"flaky": "PPF", "low": "PFF", "down": "PEP", "cut": "P"}  # "cut": --fail-fast stopped it after one try
    for index in range(3):
        for case_id, statuses in tries.items():
            if index < len(statuses):
                status = {"P": Status.PASSED, "F": Status.FAILED, "E": Status.ERROR}[statuses[index]]
                writer.write(case_result(case_id, status, run_index=index, error="refused" if status is Status.ERROR else None))
    writer.close()
    root = ET.parse(path).getroot()
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert list(cases) == ["flaky", "low", "down", "cut"]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "1")
    assert cases["flaky"].find("failure") is None and cases["flaky"].findtext("system-out").startswith(
        "passed 2 of 3 tries (the gate: 0.6)\nrun 3: failed"
    )
    assert cases["low"].find("failure").get("message").startswith("passed 1 of 3 tries, below the 0.6 gate")
    assert cases["down"].find("error").get("type") == "error" and "run 2: error\n  refused" in cases["down"].findtext(
        "system-out"
    )
    assert {p.get("name"): p.get("value") for p in cases["cut"].iter("property")} == {
        "pass_rate": "1",
        "tries": "1",
        "passed": "1",
        "min_pass_rate": "0.6",
    }


def test_under_adaptive_repeats_only_the_tries_due_count_as_not_run():
    from farm.gate import tries_due
    from farm.summary import TriedCase

    decided = TriedCase(results=2, stopped=True)  # its other 8 tries were never due
    first_tries = TriedCase(results=1)  # its second first try was due
    undecided = TriedCase(results=4)  # its next try was due
    skipped = TriedCase(results=2, skipped=True)  # not judged: it stops at its first tries
    assert tries_due([decided, first_tries, undecided, skipped], planned=4, least=2) == 2
    assert tries_due([decided, undecided], planned=4, least=2) == 1 + 2 * 2  # two cases never started
    assert tries_due([decided] * 4, planned=4, least=2) == 0
