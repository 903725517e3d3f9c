"""The ``farm view`` server over real HTTP on 127.0.0.1: its endpoints, what it refuses, and that it writes nothing."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest

from farm.reports.stats import wilson_interval
from farm.view import ViewApp, ViewServer, is_loopback

from .conftest import AGENTS, FIRST, GOING, SECOND, SUITE


@pytest.fixture(scope="module")
def server(results_root: Path):
    server = ViewServer(ViewApp(str(results_root)))
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def get(server: ViewServer, path: str, host: str | None = None) -> tuple[int, bytes]:
    """``GET path`` sent as it is (no client-side normalising of ``..``)."""
    connection = http.client.HTTPConnection(*server.server_address[:2], timeout=30)
    connection.putrequest("GET", path, skip_host=host is not None)
    if host is not None:
        connection.putheader("Host", host)
    connection.endheaders()
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def get_json(server: ViewServer, path: str) -> dict:
    status, body = get(server, path)
    assert status == 200, body
    return json.loads(body)


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/static/../secret.txt",
        "/static/..%2F..%2Fsecret.txt",
        "/static/%2e%2e/server.py",
        "/api/runs/..",
        "/api/runs/../cases",
        "/api/runs/..%2Fsecret.txt",
        f"/api/runs/..%2F{Path.cwd().name}/cases",
        "/api/runs/%2Fetc/cases",
        "/api/runs/.cache/cases",
        f"/api/compare?a=..&b={FIRST}",
    ],
)
def test_a_path_out_of_the_results_folder_is_refused(server: ViewServer, path: str):
    status, body = get(server, path)
    assert status == 404, (path, body)
    assert b"outside the results folder" not in body


@pytest.mark.parametrize("path", [f"/api/runs/{FIRST}%00", "/api/runs/a%00b/cases", f"/api/runs/{FIRST}/cases/x%00y", "/static/app.js%00"])
def test_a_nul_in_the_url_is_one_sentence_not_an_empty_reply(server: ViewServer, path: str):
    status, body = get(server, path)
    assert status == 400, (path, body)
    assert json.loads(body) == {"error": "A URL may not hold a NUL character (%00)."}


def test_the_server_listens_on_ipv6_loopback(results_root: Path):
    server = ViewServer(ViewApp(str(results_root)), "::1")
    server.start()
    try:
        assert server.url.startswith("http://[::1]:")
        assert [run["name"] for run in get_json(server, "/api/runs")["runs"]][-1] == FIRST
    finally:
        server.shutdown()
        server.server_close()


def test_a_foreign_host_name_is_refused_on_loopback(server: ViewServer):
    status, body = get(server, "/api/runs", host="evil.example:80")
    assert status == 403 and b"127.0.0.1" in body
    assert get(server, "/api/runs", host=f"localhost:{server.server_address[1]}")[0] == 200
    assert is_loopback("127.0.0.2") and is_loopback("::1") and not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_the_runs_list_holds_every_run_newest_first_with_progress_of_the_one_going(server: ViewServer):
    runs = get_json(server, "/api/runs")["runs"]
    assert [run["name"] for run in runs] == [GOING, AGENTS, SECOND, FIRST]  # not .cache, not notes/
    going, agents, second, first = runs
    assert going["status"] == "running" and going["progress"] == {"done": 3, "planned": 6}
    assert first["counts"] == {"total": 10, "passed": 7, "failed": 2, "skipped": 1, "error": 0, "timeout": 0, "role_errors": 0}
    assert first["pass_rate"] == pytest.approx(7 / 9)
    assert agents["agents"] == ["helper-bot", "support-bot"] and agents["cost_usd"] == pytest.approx(0.2)  # the cases' cost_usd
    assert first["cost_usd"] == 0.42 and first["role_cost_usd"] == 0.05  # run.json's cost
    assert second["suite"] == "support.jsonl" and second["wall_s"] == 12.5 and second["cost_usd"] == 0.51 and going["cost_usd"] is None


def test_a_run_still_going_lists_the_cases_of_its_parts(server: ViewServer, results_root: Path):
    assert not (results_root / GOING / "cases.parquet").exists() and (results_root / GOING / ".parts").is_dir()
    assert [row["case_id"] for row in get_json(server, f"/api/runs/{GOING}/cases")["rows"]] == ["faq-01", "faq-02", "faq-03"]
    assert get_json(server, f"/api/runs/{GOING}/cases/faq-02")["repetitions"][0]["turns"][0]["output"] == "answer number 2"


def test_a_new_run_shows_without_a_restart(server: ViewServer, results_root: Path):
    before = len(get_json(server, "/api/runs")["runs"])
    (results_root / "20260105-100000-eeeeee").mkdir()
    (results_root / "20260105-100000-eeeeee" / "run.json").write_text(json.dumps({"run_id": "20260105-100000-eeeeee", "status": "running"}))
    try:
        runs = get_json(server, "/api/runs")["runs"]
        assert len(runs) == before + 1 and runs[0]["status"] == "running" and runs[0]["counts"]["total"] == 0
    finally:
        (results_root / "20260105-100000-eeeeee" / "run.json").unlink()
        (results_root / "20260105-100000-eeeeee").rmdir()


def test_cases_filter_search_sort_and_page(server: ViewServer):
    failed = get_json(server, f"/api/runs/{FIRST}/cases?status=failed")
    assert failed["total"] == 2 and [row["case_id"] for row in failed["rows"]] == ["book-trip", "faq-03"]
    assert failed["rows"][1]["error"] == "turn 1: contains: reply lacks 'answer' (3)"
    assert {row["suite"] for row in failed["rows"]} == {SUITE} and failed["facets"]["suite"] == [{"value": SUITE, "count": 10}]  # the page lists suites when a run has two
    assert get_json(server, f"/api/runs/{FIRST}/cases?q=ZEBRA")["rows"][0]["case_id"] == "faq-07"  # an input
    assert get_json(server, f"/api/runs/{FIRST}/cases?q=on+its+way")["rows"][0]["case_id"] == "refund-flow"  # a reply
    assert get_json(server, f"/api/runs/{FIRST}/cases?tag=billing")["total"] == 4
    assert get_json(server, f"/api/runs/{AGENTS}/cases?agent=helper-bot&status=failed")["total"] == 2
    page = get_json(server, f"/api/runs/{FIRST}/cases?sort=duration_ms&desc=1&offset=1&limit=2")
    assert page["total"] == 10 and [row["case_id"] for row in page["rows"]] == ["refund-flow", "faq-08"]
    assert get(server, f"/api/runs/{FIRST}/cases?limit=many")[0] == 400


def test_a_case_with_its_repetitions_and_checks(server: ViewServer):
    detail = get_json(server, f"/api/runs/{SECOND}/cases/faq-04")
    assert [rep["case"]["status"] for rep in detail["repetitions"]] == ["passed", "failed"]
    assert detail["stability"] == {"runs": 2, "passed": 1, "pass_rate": 0.5, "class": "unstable"}
    trip = get_json(server, f"/api/runs/{FIRST}/cases/book-trip")["repetitions"][0]
    assert [check["scope"] for check in trip["checks"]] == ["turn", "checkpoint", "checkpoint"]
    assert trip["turns"][0]["simulator_reasoning"].startswith("Start with the destination")
    refund = get_json(server, f"/api/runs/{FIRST}/cases/refund-flow")["repetitions"][0]
    assert refund["turns"][0]["tool_calls"][0]["args"] == {"order": "1234"}
    spans = refund["turns"][0]["spans"]  # a waterfall: by start, each under its parent
    assert [(span["name"], span["depth"], span["offset_ms"]) for span in spans] == [
        ("agent run", 0, 0.0), ("chat gpt-4o", 1, 10.0), ("execute_tool lookup_order", 1, 170.0), ("execute_tool charge_card", 1, 240.0),
    ]  # fmt: skip
    assert spans[3]["status"] == "error" and refund["turns"][1]["spans"] == []
    assert get(server, f"/api/runs/{FIRST}/cases/no-such-case")[0] == 404


def test_compare_puts_changed_cases_first(server: ViewServer):
    data = get_json(server, f"/api/compare?a={FIRST}&b={SECOND}")
    assert data["changes"]["regression"] == 2 and data["changes"]["fix"] == 1
    assert [row["change"] for row in data["rows"][:3]] == ["regression", "regression", "fix"]
    stats = data["statistics"]
    assert (stats["a_only"], stats["b_only"], stats["paired"]) == (2, 1, 9)
    # SECOND ran --runs 2: per case, the side with the higher pass rate is better (farm report's rule),
    # and the paired difference is farm report's, its test the one for repeated tries
    assert stats["repeated"] is True and stats["test"] == "paired t and Cochran-Mantel-Haenszel"
    assert 0.05 < stats["p_value"] < 1.0 and stats["significant"] is False
    low, high = stats["difference_interval"]
    assert low < stats["difference"] < high and stats["difference"] < 0
    assert stats["sentence"].startswith(f"{SECOND} passes ") and "not significant: this could be noise" in stats["sentence"]
    assert stats["interval_a"] == pytest.approx(wilson_interval(7, 9))  # one try per case: plain Wilson
    low, high = stats["interval_b"]  # --runs 2: clustered by case, wider than 13 of 18 as if independent
    assert low < 13 / 18 < high and high - low > wilson_interval(13, 18)[1] - wilson_interval(13, 18)[0]
    agents = get_json(server, f"/api/compare?a={AGENTS}&agent_a=support-bot&agent_b=helper-bot&changed=1")
    assert agents["total"] == 2 and {row["case_id"] for row in agents["rows"]} == {"faq-03", "faq-04"}


def test_a_run_of_two_agents_gives_each_agents_figures_and_trend(server: ViewServer):
    agents = {run["name"]: run for run in get_json(server, "/api/runs")["runs"]}[AGENTS]
    assert [(a["agent"], a["counts"]["passed"], a["pass_rate"]) for a in agents["per_agent"]] == [("helper-bot", 2, 0.5), ("support-bot", 4, 1.0)]
    default = get_json(server, "/api/trends?suite=/suites/support.jsonl")
    assert default["agent"] == "support-bot" and default["agents"] == ["support-bot", "helper-bot"]  # the agent of most runs first
    assert [p["pass_rate"] for p in default["points"] if p["name"] == AGENTS] == [1.0]
    helper = get_json(server, "/api/trends?suite=/suites/support.jsonl&agent=helper-bot")["points"]
    assert [(p["name"], p["agents"], p["total"], p["pass_rate"]) for p in helper] == [(AGENTS, ["helper-bot"], 4, 0.5)]


def test_run_json_shows_no_header_values(server: ViewServer):
    status, body = get(server, f"/api/runs/{FIRST}")
    assert status == 200 and b"sk-never-shown" not in body
    assert json.loads(body)["info"]["config"]["connectors"]["bot"]["headers"] == {"Authorization": "…"}


def test_the_server_writes_nothing_into_the_results_folder(server: ViewServer, results_root: Path):
    before = {path: path.stat().st_mtime_ns for path in results_root.rglob("*")}
    for path in ("/api/runs", f"/api/runs/{FIRST}/cases?q=x", f"/api/runs/{FIRST}/cases/book-trip", f"/api/compare?a={FIRST}&b={SECOND}", "/api/trends?suite=/suites/support.jsonl"):
        assert get(server, path)[0] == 200
    assert {path: path.stat().st_mtime_ns for path in results_root.rglob("*")} == before
