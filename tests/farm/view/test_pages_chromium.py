"""The ``farm view`` pages as a browser shows them: headless Chromium loads each page from the real
server, runs its script (the fetches included: virtual time waits for them), and dumps the DOM."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from farm.results import Status
from farm.view import ViewApp, ViewServer

from .conftest import FIRST, SECOND, SUITE, T0, plain_case, write_run

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")


class Page(HTMLParser):
    """Text by element id, the rows of each table by id, and the attributes of every element."""

    VOID = {"meta", "br", "img", "input", "link", "hr", "circle", "line", "polyline"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.tables: dict[str, list[list[str]]] = {}
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self._open: list[tuple[str, str | None]] = []
        self._table: str | None = None
        self._in_body = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append((tag, attributes))
        if tag == "table":
            self._table = attributes.get("id")
        if tag == "tbody":
            self._in_body = True
        if tag == "tr" and self._in_body and self._table:
            self.tables.setdefault(self._table, []).append([])
        if tag == "td" and self._in_body and self._table:
            self.tables[self._table][-1].append("")
        if tag in self.VOID:
            return
        self._open.append((tag, attributes.get("id")))
        if attributes.get("id"):
            self.ids[attributes["id"]] = ""

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, element_id in self._open:
            if element_id:
                self.ids[element_id] += data
        if self._in_body and self._table and self.tables.get(self._table) and self.tables[self._table][-1]:
            self.tables[self._table][-1][-1] += data


@pytest.fixture(scope="module")
def server(results_root: Path):
    server = ViewServer(ViewApp(str(results_root)))
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def shown(server: ViewServer, fragment: str, tmp_path: Path, state: str = "ready") -> Page:
    """The DOM of ``fragment`` once its script and fetches are done (the page then in ``state``)."""
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=10000", "--dump-dom", server.url + fragment,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    page = Page()
    page.feed(done.stdout)
    states = [attrs.get("data-state") for tag, attrs in page.elements if tag == "main"]
    assert states == [state], (states, page.ids.get("error"), done.stdout[-2000:])
    return page


def test_the_runs_list(server: ViewServer, tmp_path: Path):
    page = shown(server, "#/", tmp_path)
    assert page.ids["run-count"] == "(4)"
    rows = page.tables["runs"]
    assert [row[2] for row in rows][-2:] == [SECOND, FIRST]
    first = rows[-1]
    assert first[7:14] == ["10", "7", "2", "0", "0", "1", "77.8%"]  # cases, passed, failed, errors, timeouts, skipped, pass rate
    assert "3 / 6" in rows[0][3] and "running" in rows[0][3]


def test_a_run_filtered_to_its_failed_cases(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/run/{FIRST}?status=failed", tmp_path)
    assert page.ids["run-id"] == FIRST and page.ids["pass-rate"] == "77.8%"
    assert page.ids["match-count"] == "2"
    rows = page.tables["cases"]
    assert [(row[0], row[1]) for row in rows] == [("failed", "book-trip"), ("failed", "faq-03")]
    assert rows[1][-1] == "turn 1: contains: reply lacks 'answer' (3)"
    chips = {attrs["data-status"]: attrs.get("class") for tag, attrs in page.elements if attrs.get("data-status")}
    assert chips["failed"] == "chip on" and chips["passed"] == "chip"


def test_a_search_over_replies(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/run/{FIRST}?q=on%20its%20way", tmp_path)
    assert [row[1] for row in page.tables["cases"]] == ["refund-flow"]


def test_a_case_transcript(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/case/{FIRST}/book-trip", tmp_path)
    transcript = page.ids["transcript"]
    assert page.ids["case-id"] == "book-trip"
    for text in ("simulator (as the user)", "I want to go to Lisbon", "Start with the destination", "Which dates?",
                 "awaiting input (content_is_question)", "+Booked flight LX 1.", "checkpoint offers-hotel", "not reached",
                 "reached at turn 1"):  # fmt: skip
        assert text in transcript, text
    assert "simulator flags: as_assistant" in transcript
    assert page.ids["blame"] == "simulator: the simulator spoke as the assistant at turn 2"
    badges = [attrs.get("title") for tag, attrs in page.elements if "truncated" in (attrs.get("class") or "")]
    assert transcript.count("cut at token limit") == len(badges) == 1 and "token limit" in (badges[0] or "")  # turn 2 only
    refund = shown(server, f"#/case/{FIRST}/refund-flow", tmp_path)
    assert "lookup_order" in refund.ids["transcript"] and '"order": "1234"' in refund.ids["transcript"]
    assert "4 spans (380 ms)" in refund.ids["transcript"] and "execute_tool charge_card" in refund.ids["transcript"]
    spans = [attrs for tag, attrs in refund.elements if attrs.get("data-span")]
    assert [attrs.get("class") for attrs in spans] == ["span", "span", "span", "span error"]  # the failed tool marked
    bars = [attrs.get("style") or "" for tag, attrs in refund.elements if attrs.get("class") == "bar" and "left" in (attrs.get("style") or "")]
    assert bars[0].replace(" ", "") == "left:0%;width:100%;" and len(bars) == 4  # on the turn's time line, under the page's policy
    assert "The agent confirmed the refund." in refund.ids["transcript"] and "score 0.9" in refund.ids["transcript"]


def test_a_case_repeated_under_runs_shows_its_stability(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/case/{SECOND}/faq-04?rep=1", tmp_path)
    assert page.ids["stability"] == "1 of 2 passed (50.0%), unstable"
    assert "nothing useful 4" in page.ids["transcript"]


def test_two_runs_compared(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/compare?a={FIRST}&b={SECOND}&case=refund-flow", tmp_path)
    assert page.ids["side-a-rate"] == "77.8%" and page.ids["side-b-rate"] == "72.2%"
    changes = page.tables["changes"]
    assert [(row[0], row[1]) for row in changes[:3]] == [("passed → failed", "faq-04"), ("passed → failed", "refund-flow"), ("failed → passed", "faq-03")]
    assert "not significant: this could be noise" in page.ids["sentence"]
    assert page.ids["p-value"].startswith("paired t and Cochran-Mantel-Haenszel test over 9 paired cases: p = 0.")
    assert page.ids["side-a-interval"] == "45.3% – 93.7%"
    # SECOND ran --runs 2: each case's cell says how many of its tries passed, not only which statuses
    data = server.app.answer(["compare"], {"a": [FIRST], "b": [SECOND]})
    tries = {row["case_id"]: f"{row['b']['passed']}/{row['b']['judged']}" for row in data["rows"] if row["b"] and row["b"]["judged"]}
    assert [row[4] for row in changes[:3]] == ["passedfailed 1/2", "failed 0/2", "passed 2/2"]
    assert all(row[4].endswith(" " + tries[row[1]]) for row in changes if row[1] in tries) and len(tries) == 9
    pair = page.ids["pair"]
    assert "Your refund of $40 is on its way." in pair and "I cannot help with refunds." in pair


def test_trends_of_a_suite(server: ViewServer, tmp_path: Path):
    page = shown(server, "#/trends", tmp_path)
    assert page.ids["trend-runs"] == "3 finished runs"  # the run still going is not a point yet
    dots = [attrs["data-run"] for tag, attrs in page.elements if tag == "circle" and attrs.get("data-run")]
    assert dots[:3] == [FIRST, SECOND, "20260103-100000-cccccc"]
    assert "$0.51" in page.ids["trend-table"]  # run.json's cost_usd when the cases table has no cost column


def test_trends_deep_link_names_the_suite_by_its_file_name(server: ViewServer, tmp_path: Path):
    page = shown(server, "#/trends?suite=support.jsonl", tmp_path)
    assert page.ids["trend-runs"] == "3 finished runs"
    assert server.app.answer(["trends"], {"suite": ["support.jsonl"]})["suite"] == SUITE


def test_runs_and_trends_count_case_runs_under_that_name(server: ViewServer, tmp_path: Path):
    assert "Case runs" in shown(server, "#/trends", tmp_path).ids["trend-table"]  # cases x repetitions x agents
    assert "Case runs" in shown(server, "#/", tmp_path).ids["runs"]


def test_a_run_of_two_agents_shows_each_agents_pass_rate_and_trend(server: ViewServer, tmp_path: Path):
    rows = shown(server, "#/", tmp_path).tables["runs"]
    (agents,) = [row for row in rows if row[2] == "20260103-100000-cccccc"]
    (rates,) = [cell for cell in agents if "helper-bot" in cell and "%" in cell]  # the pass rate column, wherever it sits
    assert "helper-bot 50.0%" in rates and "support-bot 100.0%" in rates
    page = shown(server, "#/trends?suite=/suites/support.jsonl&agent=helper-bot", tmp_path)
    assert page.ids["trend-runs"] == "1 finished run" and "support-bot" in page.ids["trend-agent"]
    assert [row[2] for row in page.tables["trend-table"]] == ["helper-bot"] and page.tables["trend-table"][0][4] == "50.0%"


def test_compare_side_by_side_shows_each_agents_own_transcript(server: ViewServer, tmp_path: Path):
    agents = "20260103-100000-cccccc"
    page = shown(server, f"#/compare?a={agents}&agent_a=support-bot&agent_b=helper-bot&case=faq-03", tmp_path)
    pair = page.ids["pair"]  # each reply once, in its own agent's column, not both in both
    assert pair.count("answer number 3") == 1 and pair.count("reply lacks 'answer'") == 1  # B's failed check, once
    assert pair.index("answer number 3") < pair.index("nothing useful 3")  # support-bot (a) left, helper-bot (b) right


def test_a_run_of_two_suites_sharing_a_case_id_lists_each_rows_suite(tmp_path: Path):
    cases = []
    for suite, status in (("/suites/a.jsonl", Status.PASSED), ("/suites/b.jsonl", Status.FAILED)):
        case = plain_case(FIRST, 1, status)
        case.id, case.source = "greets", f"{suite}:1"
        cases.append(case)
    write_run(tmp_path / "results", FIRST, cases, started=T0)
    server = ViewServer(ViewApp(str(tmp_path / "results")))
    server.start()
    try:
        rows = shown(server, f"#/run/{FIRST}", tmp_path).tables["cases"]
    finally:
        server.shutdown()
        server.server_close()
    assert [row[:3] for row in rows] == [["passed", "greets", "/suites/a.jsonl"], ["failed", "greets", "/suites/b.jsonl"]]


def test_a_run_of_one_suite_lists_no_suite(server: ViewServer, tmp_path: Path):
    rows = shown(server, f"#/run/{FIRST}?status=failed", tmp_path).tables["cases"]
    assert [row[2] for row in rows] == ["Books a trip", "FAQ 3"]  # the name follows the case id: no suite column
