"""``farm view`` over a results folder with damaged runs: a wrongly typed ``run.json`` field, a NaN,
a truncated Parquet file, and a link out of the folder. Each damaged run is one row of the runs list
that says what is wrong with it; the pages of the others work; the link is neither listed nor served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.results import AssertionResult, Status
from farm.view import ViewApp, ViewServer

from .conftest import SUITE, T0, plain_case, write_run
from .test_pages_chromium import CHROMIUM, shown
from .test_server import get, get_json

GOOD, TYPO, NAN, CUT = "20260201-100000-good00", "20260202-100000-typo00", "20260203-100000-nan000", "20260204-100000-cut000"


def damage(folder: Path, **fields: object) -> None:
    """Set ``fields`` in the run's ``run.json`` as Python's json writes them (NaN included)."""
    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**info, **fields}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("damaged")
    root = base / "results"
    for day, name in enumerate((GOOD, TYPO, NAN, CUT)):
        judged = [] if name != NAN else [plain_case(name, 9, Status.FAILED)]
        for case in judged:  # a judge that answered NaN as its score (Python's json reads it)
            case.turns[0].assertions.append(AssertionResult(type="agent", passed=False, score=float("nan"), reason="?"))
        write_run(root, name, [*(plain_case(name, n, Status.PASSED) for n in range(1, 4)), *judged], started=T0 + day * 86400)
    damage(root / TYPO, started_at="yesterday", agents="support-bot")
    damage(root / NAN, ended_at=float("nan"), cost={"cost_usd": float("nan"), "role_cost_usd": None})
    cases = root / CUT / "cases.parquet"
    cases.write_bytes(cases.read_bytes()[:200])
    outside = write_run(base, "20260205-100000-out000", [plain_case("out", 1, Status.PASSED)], started=T0)
    (root / "20260205-100000-out000").symlink_to(outside, target_is_directory=True)
    server = ViewServer(ViewApp(str(root)))
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_runs_list_answers_with_each_damaged_run_as_one_row_saying_what_is_wrong(server: ViewServer):
    runs = {run["name"]: run for run in get_json(server, "/api/runs")["runs"]}
    assert set(runs) == {GOOD, TYPO, NAN, CUT}  # not the link out of the folder
    assert runs[GOOD]["problems"] == [] and runs[GOOD]["counts"]["passed"] == 3
    (typo,) = [p for p in runs[TYPO]["problems"] if "started_at" in p]
    assert "started_at is text, not a number" in typo and runs[TYPO]["started_at"] is None
    assert any("agents is text, not a list" in p for p in runs[TYPO]["problems"]) and runs[TYPO]["agents"] == ["support-bot"]
    assert runs[NAN]["cost_usd"] is None and runs[NAN]["wall_s"] is None and runs[NAN]["counts"]["total"] == 4
    assert any("ended_at is nan" in p for p in runs[NAN]["problems"]) and any("cost.cost_usd is nan" in p for p in runs[NAN]["problems"])
    assert runs[CUT]["counts"]["total"] == 0 and "cases.parquet cannot be read" in runs[CUT]["problems"][0]
    assert all("Traceback" not in p and "Input should" not in p for run in runs.values() for p in run["problems"])


def test_suites_trends_and_the_damaged_runs_own_pages_answer(server: ViewServer):
    suites = get_json(server, "/api/suites")["suites"]
    assert suites == [{"suite": SUITE, "runs": 4}]
    points = get_json(server, f"/api/trends?suite={SUITE}")["points"]
    assert {point["name"] for point in points} == {GOOD, TYPO, NAN, CUT}
    assert get_json(server, f"/api/runs/{NAN}")["info"]["ended_at"] is None
    (judge,) = [c for c in get_json(server, f"/api/runs/{NAN}/cases/faq-09")["repetitions"][0]["checks"] if c["type"] == "agent"]
    assert judge["score"] is None and judge["passed"] is False
    assert get_json(server, f"/api/runs/{CUT}/cases")["total"] == 0
    assert get_json(server, f"/api/runs/{CUT}/cases?q=answer")["total"] == 0
    assert get_json(server, f"/api/compare?a={GOOD}&b={CUT}")["changes"]["only_a"] == 3
    assert get_json(server, f"/api/runs/{TYPO}/cases/faq-01")["repetitions"][0]["turns"][0]["output"] == "answer number 1"


def test_a_link_out_of_the_results_folder_is_not_served(server: ViewServer):
    for path in ("/api/runs/20260205-100000-out000", "/api/runs/20260205-100000-out000/cases", "/api/runs/20260205-100000-out000/cases/faq-01"):
        status, body = get(server, path)
        assert status == 404 and b"answer number" not in body


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")
def test_the_pages_say_what_is_wrong_with_a_damaged_run(server: ViewServer, tmp_path: Path):
    rows = {row[2]: row for row in shown(server, "#/", tmp_path).tables["runs"]}
    assert "⚠ 1 problem" in rows[CUT][3] and "⚠" not in rows[GOOD][3]
    page = shown(server, f"#/run/{CUT}", tmp_path)
    assert "cases.parquet cannot be read" in page.ids["problems"]
