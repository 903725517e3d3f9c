"""The HTML report as a browser renders it: headless Chromium loads the page, runs its script, and dumps the DOM."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from farm.reports import HTMLWriter
from farm.results import AssertionResult, CaseResult, Status, ToolCallRecord, TurnResult, Usage

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)"
)

# The run: 7 case runs.
STATUSES = [Status.PASSED, Status.PASSED, Status.PASSED, Status.FAILED, Status.FAILED, Status.SKIPPED, Status.TIMEOUT]


def case_run(number: int, status: Status) -> CaseResult:
    passed = status is Status.PASSED
    return CaseResult(
        run_id="run-chromium",
        id=f"case-{number}",
        name=f"Case {number}",
        status=status,
        agent="support-bot",
        turns=[
            TurnResult(
                turn=1,
                input=f"question {number}",
                output=f"answer {number} <i>not markup</i>",
                tool_calls=[ToolCallRecord(name="search", args={"q": number}, result={"hits": 2})],
                assertions=[
                    AssertionResult(
                        type="contains",
                        expected="answer",
                        passed=passed,
                        message=None if passed else f"reply {number} lacked it",
                    )
                ],  # fmt: skip
                duration_ms=200.0 * number,
                usage=Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10),
            )
        ],
        total_turns=1,
        duration_ms=200.0 * number + 5,
        usage=Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10),
        error=None if passed else f"{status.value} because of reasons",
    )


class Dom(HTMLParser):
    """Text of elements with an id, and the case sections (with whether they are hidden)."""

    VOID = {"meta", "br", "img", "input", "link", "rect", "line", "circle", "path", "hr"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.cases: list[dict[str, str | None]] = []
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "details" and "case" in (attributes.get("class") or "").split():
            self.cases.append(attributes)
        if tag in self.VOID:
            return
        self._open.append((tag, attributes.get("id")))
        if attributes.get("id"):
            self.ids[attributes["id"]] = ""

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data):
        for _, element_id in self._open:
            if element_id:
                self.ids[element_id] += data


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("html") / "report.html"
    writer = HTMLWriter(path, "run-chromium")
    for number, status in enumerate(STATUSES, 1):
        writer.write(case_run(number, status))
    writer.close()
    return path


def rendered(page: Path, tmp_path: Path, fragment: str = "") -> Dom:
    """The DOM after Chromium loaded ``page`` (and its script ran)."""
    profile = tmp_path / "chromium-profile"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--dump-dom",
        page.as_uri() + fragment,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "</html>" in done.stdout, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    return dom


def test_chromium_renders_the_run_numbers(report: Path, tmp_path: Path):
    dom = rendered(report, tmp_path)
    numbers = {key: dom.ids.get(key) for key in (
        "count-total", "count-passed", "count-failed", "count-skipped", "count-error", "count-timeout",
        "pass-rate", "total-turns", "total-tokens", "run-id",
    )}  # fmt: skip
    assert numbers == {
        "count-total": "7",
        "count-passed": "3",
        "count-failed": "2",
        "count-skipped": "1",
        "count-error": "0",
        "count-timeout": "1",
        "pass-rate": "50.0%",
        "total-turns": "7",
        "total-tokens": "70",
        "run-id": "run-chromium",
    }
    # The script ran: it counted the visible case sections and marked the filter.
    assert dom.ids.get("visible-count") == "7"
    assert dom.ids.get("active-filter") == "all"
    assert len(dom.cases) == 7 and not any("hidden" in case for case in dom.cases)
    assert "answer 4 <i>not markup</i>" in dom.ids.get("cases", "")  # escaped text, not elements


def test_chromium_applies_the_status_filter_from_the_fragment(report: Path, tmp_path: Path):
    dom = rendered(report, tmp_path, "#failed")
    assert dom.ids.get("active-filter") == "failed"
    assert dom.ids.get("visible-count") == "2"
    shown = [case["data-case-id"] for case in dom.cases if "hidden" not in case]
    assert shown == ["case-4", "case-5"]


@pytest.mark.parametrize("fragment", ["#%", "#%E0%A4%A", "#fail%zz"])
def test_a_fragment_with_a_bad_escape_shows_every_case(report: Path, tmp_path: Path, fragment: str):
    dom = rendered(report, tmp_path, fragment)
    assert dom.ids.get("active-filter") == "all"
    assert dom.ids.get("visible-count") == "7"
