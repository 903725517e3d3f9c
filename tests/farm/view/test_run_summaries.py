"""``farm view``'s figures of a run agree with ``farm report``'s: a role's failure says nothing of the agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from farm.reports.analysis import analyse
from farm.results import Status
from farm.view.folders import ResultsFolder
from farm.view.runs import RunSummaries
from tests.farm.view.conftest import T0, plain_case


@pytest.mark.parametrize("finish", [True, False], ids=["finished", "still-going"])
def test_a_role_error_is_left_out_of_the_pass_rate_as_farm_report_leaves_it_out(tmp_path: Path, finish: bool):
    from tests.farm.view.conftest import write_run

    run_id = "20260105-100000-eeeeee"
    judged_out = plain_case(run_id, 3, Status.ERROR).model_copy(update={"error": "the validator answered no verdict", "error_role": "validator"})
    results = [plain_case(run_id, 1, Status.PASSED), plain_case(run_id, 2, Status.FAILED), judged_out]
    folder = write_run(tmp_path, run_id, results, started=T0, finish=finish)
    [summary] = RunSummaries(ResultsFolder(tmp_path)).all()
    assert summary["pass_rate"] == pytest.approx(1 / 2)  # 1 passed of the 2 the agent answered for; not 1 of 3
    assert summary["per_agent"][0]["pass_rate"] == pytest.approx(1 / 2)
    if finish:
        assert analyse([folder]).summary.counts.pass_rate == pytest.approx(summary["pass_rate"])
