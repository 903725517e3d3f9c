"""The ``farm view`` pages at their edges, in headless Chromium: the runs table at 1280 px with long
names, its Errors column and role cost, a stopped run in Trends, one run's two agents compared, and
fragments with a bad ``%`` escape. Layout is measured in the browser over the DevTools protocol."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from farm.results import Status
from farm.view import ViewApp, ViewServer

from .conftest import SUITE, T0, plain_case, write_run
from .test_pages_chromium import CHROMIUM, shown

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")

FINISHED, STOPPED, LONG = "20260301-100000-finish", "20260302-100000-stoppd", "20260303-100000-longnm"
LONG_SUITE = "/home/someone/projects/expense-assistant/suites/regression_suite_for_travel_and_hospitality_expenses.jsonl"
AGENT_A, AGENT_B = "assistants.expense_reimbursement_v2_candidate", "assistants.expense_reimbursement_v1_baseline"


def _set_run_json(folder: Path, **fields: Any) -> None:
    path = folder / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("view-edges")
    statuses = [Status.PASSED, Status.ERROR, Status.ERROR, Status.TIMEOUT, Status.FAILED]
    write_run(root, FINISHED, [plain_case(FINISHED, n, s, cost=0.000085) for n, s in enumerate(statuses, 1)], started=T0, cost=0.0004)
    stopped = write_run(root, STOPPED, [plain_case(STOPPED, n, Status.PASSED) for n in range(1, 3)], started=T0 + 86400)
    _set_run_json(stopped, status="stopped", stop_reason="max_cost")
    both = [plain_case(LONG, n, Status.PASSED if n < 3 else Status.FAILED, agent=agent) for n in range(1, 5) for agent in (AGENT_A, AGENT_B)]
    long = write_run(root, LONG, both, started=T0 - 86400, agent=AGENT_A)  # not the newest: "with" must not default to it
    _set_run_json(long, input=LONG_SUITE)
    server = ViewServer(ViewApp(str(root)))
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def evaluated(server: ViewServer, fragment: str, expression: str, tmp_path: Path, width: int = 1280) -> Any:
    """The value of the JavaScript ``expression`` in ``fragment`` once the page is ready, in a
    headless Chromium window ``width`` pixels wide."""
    profile = tmp_path / "cdp-profile"
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", f"--window-size={width},900",
        "--remote-debugging-port=0", server.url + fragment,
    ]  # fmt: skip
    browser = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return asyncio.run(_evaluate(profile / "DevToolsActivePort", expression, time.monotonic() + 90))
    finally:
        browser.terminate()
        browser.wait(timeout=30)


async def _evaluate(port_file: Path, expression: str, deadline: float) -> Any:
    ready = f"document.querySelector('main').dataset.state === 'ready' ? JSON.stringify({expression}) : null"
    async with aiohttp.ClientSession() as session:
        while True:
            port = port_file.read_text().split()[0] if port_file.is_file() and port_file.read_text().strip() else None
            if port is not None:
                async with session.get(f"http://127.0.0.1:{port}/json/list") as answer:
                    pages = [target for target in await answer.json() if target["type"] == "page"]
                if pages:
                    break
            assert time.monotonic() < deadline, "Chromium did not open the page"
            await asyncio.sleep(0.2)
        async with session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as socket:
            for number in itertools.count(1):
                await socket.send_json({"id": number, "method": "Runtime.evaluate", "params": {"expression": ready, "returnByValue": True}})
                while (message := await socket.receive_json()).get("id") != number:
                    pass
                value = message["result"]["result"].get("value")
                if value is not None:
                    return json.loads(value)
                assert time.monotonic() < deadline, "the page never became ready"
                await asyncio.sleep(0.2)


def test_the_runs_table_fits_a_1280_px_window_with_long_names(server: ViewServer, tmp_path: Path):
    widths = evaluated(
        server, "#/", "[document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.getElementById('runs').getBoundingClientRect().right]", tmp_path,
    )  # fmt: skip
    scroll, client, right = widths
    assert scroll <= client and right <= client, widths


def test_the_runs_table_has_errors_and_timeouts_and_says_what_cost_leaves_out(server: ViewServer, tmp_path: Path):
    page = shown(server, "#/", tmp_path)
    heads = [attrs for tag, attrs in page.elements if tag == "th"]
    rows = {row[2]: row for row in page.tables["runs"]}
    finished = rows[FINISHED]
    assert finished[7:13] == ["5", "1", "1", "2", "1", "0"]  # cases, passed, failed, errors, timeouts, skipped
    assert finished[14] == "$0.00043+ $0.050 roles"  # five cases at $0.000085; the roles' cost below it
    assert any("role calls" in (attrs.get("title") or "") for attrs in heads)


def test_trends_count_a_stopped_run_apart_from_the_finished_ones(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/trends?suite={SUITE}", tmp_path)
    assert page.ids["trend-runs"] == "1 finished run; 1 stopped early, not shown"
    dots = [attrs["data-run"] for tag, attrs in page.elements if tag == "circle" and attrs.get("data-run")]
    assert dots == [FINISHED, FINISHED, FINISHED]


def test_comparing_two_agents_of_one_run_offers_that_run_on_both_sides(server: ViewServer, tmp_path: Path):
    page = shown(server, f"#/compare?a={LONG}&agent_a={AGENT_A}&agent_b={AGENT_B}", tmp_path)
    picked = {}
    select = None
    for tag, attrs in page.elements:
        if tag == "select":
            select = attrs.get("id")
        if tag == "option" and "selected" in attrs:
            picked[select] = attrs["value"]
    assert picked == {"pick-a": LONG, "pick-b": LONG}


@pytest.mark.parametrize("fragment", ["#/%E0%A4%A", "#/%", "#/trends?suite=%zz"])
def test_a_fragment_with_a_bad_escape_still_shows_a_page(server: ViewServer, tmp_path: Path, fragment: str):
    shown(server, fragment, tmp_path)  # ready: not left on "Loading…"


def test_a_run_named_with_a_bad_escape_is_said_not_to_exist(server: ViewServer, tmp_path: Path):
    page = shown(server, "#/run/%zz", tmp_path, state="error")
    assert page.ids["error"].startswith("There is no run called '%zz'")
