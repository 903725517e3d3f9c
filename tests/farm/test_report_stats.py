"""``farm report``'s statistics: per agent intervals, pass@k and pass^k, flaky cases, cost, and the
paired comparisons of two agents in a run and of two runs, on results built by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.reports import analyse
from farm.reports.stats import clustered_interval, holm, mcnemar_exact, wilson_interval
from farm.results import Status
from farm.writers import ParquetWriter, write_run_json
from tests.factories import case_result

START = 1_760_000_000.0


def write_run(
    folder: Path, run_id: str, outcomes: dict[tuple[str, str], list[bool]], runs: int,
    cost: dict[str, float] | None = None, day: int = 0,
) -> Path:  # fmt: skip
    """A run folder: ``outcomes`` maps (agent, case id) to each try's pass; ``cost`` the agent's USD per case
    run; ``day``: days after START it started."""
    write_run_json(folder, {"run_id": run_id, "started_at": START + day * 86_400, "runs": runs})
    with ParquetWriter(folder) as writer:
        for (agent, case_id), tries in outcomes.items():
            for index, passed in enumerate(tries):
                writer.write(
                    case_result(
                        case_id, Status.PASSED if passed else Status.FAILED, run_id=run_id, run_index=index,
                        agent=agent, source="suite.jsonl:1", started_at=START + index,
                        cost_usd=(cost or {}).get(agent), role_cost_usd=0.0001 if cost else None,
                    )
                )  # fmt: skip
    return folder


@pytest.fixture
def two_agents(tmp_path: Path) -> Path:
    """40 cases on two agents, three tries each: v1 passes all; v2 refuses every third case, every time."""
    outcomes = {}
    for n in range(40):
        outcomes[("v1", f"c{n:02}")] = [True] * 3
        outcomes[("v2", f"c{n:02}")] = [n % 3 != 0] * 3
    return write_run(tmp_path / "run", "run-ab", outcomes, runs=3, cost={"v1": 0.001, "v2": 0.002})


def test_each_agent_has_a_clustered_interval_pass_at_k_and_pass_hat_k(two_agents: Path):
    report = analyse([two_agents])
    v1, v2 = report.agents
    assert (v1.agent, v1.cases, v1.tries, v1.passes, v1.k, v1.k_cases) == ("v1", 40, 120, 120, 3, 40)
    assert v1.interval_method == "wilson-clustered"
    # every try passed: nothing tells how alike a case's tries are, so the 40 cases count, not the 120 tries
    assert v1.interval == pytest.approx(wilson_interval(40, 40))
    assert (v1.pass_at_k, v1.pass_hat_k) == (1.0, 1.0)
    # v2: 26 cases pass 3 of 3, 14 pass 0 of 3; p = 0.65, residual 26 * 1.05^2 + 14 * 1.95^2 = 81.9,
    # n_eff = 120^2 * 0.65 * 0.35 / 81.9 = 40: the cases' tries agree fully, so the interval is 26 of 40's
    assert (v2.tries, v2.passes) == (120, 78)
    assert v2.interval == pytest.approx(wilson_interval(26, 40))
    assert v2.interval[0] < 0.65 < v2.interval[1]
    assert v2.pass_at_k == pytest.approx(26 / 40) and v2.pass_hat_k == pytest.approx(26 / 40)
    assert v2.flaky_total == 0
    assert v1.cost_usd == pytest.approx(0.12) and v2.cost_usd == pytest.approx(0.24)
    assert v2.cost_per_case_usd == pytest.approx(0.002) and v2.role_cost_usd == pytest.approx(0.012)


def test_two_agents_of_a_run_are_compared_case_by_case(two_agents: Path):
    (comparison,) = analyse([two_agents]).comparisons
    assert (comparison.kind, comparison.a, comparison.b, comparison.cases) == ("agents", "v1", "v2", 40)
    assert (comparison.b_better, comparison.b_worse, comparison.same) == (0, 14, 26)
    # 14 cases at -1, 26 at 0: the mean, and its interval with t(0.975, 39) = 2.022690920036761 (scipy)
    se = math.sqrt((14 * 0.65**2 + 26 * 0.35**2) / 39 / 40)
    assert comparison.difference == pytest.approx(-0.35)
    assert comparison.difference_interval == pytest.approx((-0.35 - 2.022690920036761 * se, -0.35 + 2.022690920036761 * se))
    # the larger p of two tests: the paired t's, scipy.stats.ttest_1samp([-1] * 14 + [0] * 26, 0), and the
    # shuffle's (each of the 14 cases: 3 of 6 tries passed, B holds 0; hypergeometric variance
    # 3*3*3*3 / (36*5) = 0.45, times (1/3 + 1/3)^2: 0.2 a case; z = 14 / sqrt(14 * 0.2))
    assert comparison.test == "paired t and Cochran-Mantel-Haenszel"
    assert math.erfc(14 / math.sqrt(2 * 14 * 0.2)) < comparison.p_value == pytest.approx(4.6291070989404555e-05)
    assert comparison.p_adjusted == comparison.p_value and comparison.significant
    assert comparison.sentence == (
        "v2 passes 35.0 percentage points less often than v1 (95 % interval -50.4 to -19.6 points; 40 cases, "
        "paired t and Cochran-Mantel-Haenszel, p < 0.0001): significant at the 5 % level."
    )
    assert [delta.case_id for delta in comparison.worse][:3] == ["c00", "c03", "c06"]
    assert (comparison.worse[0].a_passes, comparison.worse[0].b_passes) == (3, 0)


def test_the_stability_of_a_case_is_counted_per_agent(two_agents: Path):
    """A case that passes on one agent and fails on the other is not flaky."""
    stability = analyse([two_agents]).stability
    assert stability.flaky_total == 0 and stability.cases == 40 and stability.agents == ["v1", "v2"]
    assert stability.classes_by_agent["v1"]["stable"] == 40 and stability.classes_by_agent["v2"]["consistently_failing"] == 14
    assert sum(stability.classes.values()) == 80  # a class per case and agent
    assert {row.agent for row in stability.least_stable} == {"v2"}


def test_flaky_cases_have_their_own_interval_and_pass_hat_k(tmp_path: Path):
    run = write_run(tmp_path / "run", "run-f", {("bot", "wobbly"): [True, False, True, True], ("bot", "steady"): [True] * 4}, runs=4)
    (stats,) = analyse([run]).agents
    (case,) = stats.flaky
    assert (case.case_id, case.tries, case.passes, case.agent) == ("wobbly", 4, 3, "bot")
    assert case.interval == wilson_interval(3, 4)
    # k = 4 = n: pass@4 is "any passed", pass^4 is C(3,4)/C(4,4) = 0
    assert (case.pass_at_k, case.pass_hat_k) == (1.0, 0.0)
    assert stats.pass_hat_k == pytest.approx(0.5)  # steady 1, wobbly 0
    assert stats.interval == pytest.approx(clustered_interval([(3, 4), (4, 4)]))
    assert stats.cost_usd is None and stats.cost_per_case_usd is None  # no price: no cost


def test_one_try_per_case_gives_wilson_and_no_pass_at_k(tmp_path: Path):
    run = write_run(tmp_path / "run", "run-1", {("bot", f"c{n}"): [n < 7] for n in range(10)}, runs=1)
    (stats,) = analyse([run]).agents
    assert stats.interval_method == "wilson" and stats.interval == wilson_interval(7, 10)
    assert stats.k is None and stats.pass_at_k is None and stats.pass_hat_k is None
    assert analyse([run]).comparisons == []


def test_two_runs_of_different_agents_are_a_paired_comparison(tmp_path: Path):
    old = write_run(tmp_path / "old", "run-old", {("v1", f"c{n}"): [True] for n in range(10)}, runs=1)
    new = write_run(tmp_path / "new", "run-new", {("v2", f"c{n}"): [n >= 3] for n in range(10)}, runs=1, day=1)
    report = analyse([old, new])
    (comparison,) = report.comparisons
    assert (comparison.kind, comparison.a_agent, comparison.b_agent) == ("runs", "v1", "v2")
    assert comparison.a == "run-old (v1)" and comparison.b == "run-new (v2)"
    assert (comparison.b_better, comparison.b_worse) == (0, 3)
    assert comparison.p_value == pytest.approx(mcnemar_exact(0, 3)) == pytest.approx(0.25)
    assert comparison.test == "exact McNemar" and not comparison.significant
    # 3 cases at -1, 7 at 0; t(0.975, 9) = 2.262157162798205, t(0.80, 9) = 0.8834038596855346 (scipy)
    se = math.sqrt((3 * 0.7**2 + 7 * 0.3**2) / 9 / 10)
    assert comparison.difference_interval == pytest.approx((-0.3 - 2.262157162798205 * se, -0.3 + 2.262157162798205 * se))
    assert comparison.detectable_difference == pytest.approx((2.262157162798205 + 0.8834038596855346) * se)
    assert comparison.sentence == (
        "run-new (v2) passes 30.0 percentage points less often than run-old (v1) (95 % interval -64.6 to +4.6 "
        "points; 10 cases, exact McNemar, p = 0.25): not significant: this could be noise; 10 cases detect a "
        "difference of 48.0 points or more (80 % power)."
    )


def test_two_runs_of_the_same_agents_compare_each_agent(tmp_path: Path):
    old = write_run(tmp_path / "old", "run-old", {("a", "x"): [False], ("b", "x"): [True], ("a", "y"): [False]}, runs=1)
    new = write_run(tmp_path / "new", "run-new", {("a", "x"): [True], ("b", "x"): [True], ("a", "y"): [True]}, runs=1, day=1)
    comparisons = analyse([old, new]).comparisons
    by_kind = [(c.kind, c.a_agent, c.b_agent, c.a_run, c.b_run, c.b_better) for c in comparisons]
    assert by_kind == [
        ("agents", "a", "b", "run-old", "run-old", 1),
        ("agents", "a", "b", "run-new", "run-new", 0),
        ("runs", "a", "a", "run-old", "run-new", 2),
        ("runs", "b", "b", "run-old", "run-new", 0),
    ]
    # each comparison names its agent: two titles "run-old -> run-new" would not say which is which
    assert comparisons[2].a == "run-old (a)" and comparisons[3].b == "run-new (b)"
    assert comparisons[2].sentence.startswith("run-new (a) passes 100.0 percentage points more often than run-old (a)")
    # four comparisons in one report: Holm-adjusted, and the sentences say so
    assert [c.p_adjusted for c in comparisons] == pytest.approx(holm([c.p_value for c in comparisons]))
    assert all("Holm-adjusted" in c.sentence for c in comparisons)


def test_farm_report_json_holds_the_statistics_and_tables_show_them(two_agents: Path):
    runner = CliRunner()
    out = runner.invoke(app, ["report", "--json", str(two_agents)])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    v2 = next(entry for entry in data["agents"] if entry["agent"] == "v2")
    low, high = v2["interval"]
    assert low < 0.65 < high and v2["pass_hat_k"] == pytest.approx(0.65) and v2["pass_at_k"] == pytest.approx(0.65)
    comparison = data["comparisons"][0]
    assert comparison["difference"] == pytest.approx(-0.35) and comparison["p_value"] == pytest.approx(4.6291070989404555e-05)
    assert comparison["p_adjusted"] == comparison["p_value"] and comparison["significant"] is True
    low, high = comparison["difference_interval"]
    assert low < -0.35 < high < 0 and 0 < comparison["detectable_difference"] < 0.35
    assert data["summary"]["cost_usd"] == pytest.approx(0.36)
    tables = runner.invoke(app, ["report", str(two_agents)], env={"COLUMNS": "200"})
    assert tables.exit_code == 0, tables.output
    assert "v2 passes 35.0 percentage points less often than v1" in tables.output
    assert "significant at the 5 % level." in tables.output and "difference is real" not in tables.output
    row = next(line.strip() for line in tables.output.splitlines() if line.strip().startswith("v1 ") and "-35.0" in line)
    assert "[-50.4, -19.6]" in row and "t, CMH" in row and "< 0.0001" in row
    assert "t, CMH: the paired t and Cochran-Mantel-Haenszel tests, the larger p." in tables.output
    assert "pass^3" in tables.output and "$0.2400" in tables.output
    assert "pass@3: the chance that at least one of 3 tries of a case passes" in tables.output
    assert "Per case run" in tables.output and "clustered by case" in tables.output


def test_equal_pass_rates_over_different_tries_are_no_difference(tmp_path: Path):
    old = write_run(tmp_path / "old", "run-old", {("bot", "x"): [True, True, False], ("bot", "y"): [True, False, False]}, runs=3)
    new = write_run(
        tmp_path / "new", "run-new",
        {("bot", "x"): [True, True, False, True, True, False], ("bot", "y"): [True, True, True, True, True, True]},
        runs=6, day=1,
    )  # fmt: skip
    (comparison,) = analyse([old, new]).comparisons
    assert (comparison.same, comparison.b_better, comparison.b_worse) == (1, 1, 0)  # x: 2/3 == 4/6; y: 1/3 -> 6/6
    assert comparison.better[0].case_id == "y" and (comparison.better[0].b_passes, comparison.better[0].b_tries) == (6, 6)
    assert comparison.difference == pytest.approx(1 / 3)  # (0 + 2/3) / 2
    assert not comparison.significant and comparison.sentence.endswith("2 cases are too few to detect any difference.")


def test_runs_of_another_suite_with_the_same_case_ids_are_not_compared(tmp_path: Path):
    old = write_run(tmp_path / "old", "run-old", {("bot", "x"): [False], ("bot", "y"): [True]}, runs=1)
    new = write_run(tmp_path / "new", "run-new", {("bot", "x"): [True], ("bot", "y"): [True]}, runs=1, day=1)
    cases = tmp_path / "new" / "cases.parquet"
    table = pq.read_table(cases)
    table = table.set_column(table.schema.get_field_index("source"), "source", pa.array(["copy.jsonl:1"] * table.num_rows))
    pq.write_table(table.set_column(table.schema.get_field_index("suite"), "suite", pa.array(["copy.jsonl"] * table.num_rows)), cases)
    report = analyse([old, new])
    assert report.comparisons == []  # x and y of copy.jsonl are other cases than those of suite.jsonl
    assert (report.comparison.paired, report.comparison.left_out, report.comparison.fixes) == (0, 4, [])
    assert report.comparison.sentence == "Run run-old and run run-new have no case in common (the same suite and case id), so they are not compared."


def _errors_run(folder: Path) -> Path:
    """10 cases on one try: 6 pass, 2 fail, c8 errs on the agent's side, c9 on the simulator's."""
    write_run_json(folder, {"run_id": "run-e", "started_at": START, "runs": 1})
    with ParquetWriter(folder) as writer:
        for n in range(10):
            status = Status.PASSED if n < 6 else Status.FAILED if n < 8 else Status.ERROR
            role = "simulator" if n == 9 else None
            writer.write(case_result(f"c{n}", status, run_id="run-e", agent="bot", source="suite.jsonl:1", started_at=START, error_role=role))
    return folder


def test_a_roles_error_is_left_out_of_the_agents_figures_and_counted(tmp_path: Path):
    report = analyse([_errors_run(tmp_path / "run")])
    (stats,) = report.agents
    # c9 is neither a pass nor a failure of the agent; c8's error is the agent's: a failure
    assert (stats.cases, stats.tries, stats.passes, stats.role_errors) == (9, 9, 6, 1)
    assert stats.interval == wilson_interval(6, 9)
    counts = report.summary.counts
    assert (counts.error, counts.role_errors, counts.pass_rate) == (2, 1, pytest.approx(6 / 9))
    tables = CliRunner().invoke(app, ["report", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert "bot: 1 case run left out, as a role failed" in tables.output
    assert "Errors:    2 (1 of a role, not the agent)" in tables.output
    assert "skipped and role errors excluded" in tables.output


def test_a_run_written_before_error_role_counts_every_error_as_the_agents(tmp_path: Path):
    run = _errors_run(tmp_path / "run")
    cases = run / "cases.parquet"
    pq.write_table(pq.read_table(cases).drop_columns(["error_role"]), cases)  # as a farm before error_role wrote it
    (stats,) = analyse([run]).agents
    assert (stats.tries, stats.passes, stats.role_errors) == (10, 6, 0)
    assert analyse([run]).summary.counts.pass_rate == pytest.approx(0.6)


def test_a_role_error_is_no_difference_between_two_agents(tmp_path: Path):
    """B's simulator died on three cases A passed: nothing says B would have failed them."""
    folder = tmp_path / "run"
    write_run_json(folder, {"run_id": "run-ab", "started_at": START, "runs": 1})
    with ParquetWriter(folder) as writer:
        for n in range(10):
            writer.write(case_result(f"c{n}", Status.PASSED, run_id="run-ab", agent="a", source="s.jsonl:1"))
            role = None if n >= 3 else "simulator"
            writer.write(case_result(f"c{n}", Status.PASSED if n >= 3 else Status.ERROR, run_id="run-ab", agent="b", source="s.jsonl:1", error_role=role))
    (comparison,) = analyse([folder]).comparisons
    assert (comparison.cases, comparison.b_better, comparison.b_worse, comparison.difference) == (7, 0, 0, 0.0)
