"""Reports: JUnit XML, the HTML page, NDJSON events, ``farm report``'s analysis, the dataset docs and the CI recipe."""

from __future__ import annotations

import glob
import io
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import yaml
from farm.cli.app import app
from farm.cli.report import PIPE_WIDTH, render
from rich.console import Console
from typer.testing import CliRunner

from farm._run.events import EventWriter
from farm.errors import UsageError
from farm.reports import HTMLWriter, JUnitWriter, analyse
from farm.reports.models import Report
from farm.results import (
    SCHEMA_VERSION,
    AssertionResult,
    CaseResult,
    CheckpointResult,
    Status,
    TurnResult,
)
from farm.summary import Summary
from farm.writers import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    TURNS_SCHEMA,
    JSONLWriter,
    ParquetWriter,
    ResultWriter,
    write_run_json,
)
from tests.factories import case_result, lookup_call, usage

ROOT = Path(__file__).resolve().parents[2]
START = 1_750_000_000.0


# --- building results ---------------------------------------------------------


def result(
    case_id: str,
    status: Status,
    run_id: str = "run-x",
    *,
    run_index: int = 0,
    started_at: float = START,
    turn_ms: tuple[float, ...] = (100.0, 300.0),
    output: str = "Your refund is on its way.",
    agent: str = "support-bot",
) -> CaseResult:
    """A static case run whose assertions agree with ``status``; the last turn's assertion fails unless passed."""
    failing = status is not Status.PASSED
    turns = [
        TurnResult(
            turn=n,
            input="I want a refund for order 42" if n == 1 else {"role": "user", "content": f"turn {n}"},
            output=output if n == len(turn_ms) else "Let me look that up.",
            tool_calls=[lookup_call()] if n == 1 else [],
            assertions=[
                AssertionResult(
                    type="contains",
                    expected="refund",
                    actual=output,
                    passed=not (failing and n == len(turn_ms)),
                    message="expected the reply to mention a refund" if failing and n == len(turn_ms) else None,
                )
            ],
            duration_ms=ms,
            usage=usage(),
        )
        for n, ms in enumerate(turn_ms, 1)
    ]
    reasons = {
        Status.SKIPPED: "the agent awaited input and --skip-interactive is on",
        Status.ERROR: "the agent answered HTTP 500",
        Status.TIMEOUT: "the case timed out after 30s",
    }
    return case_result(
        case_id,
        status,
        turns,
        run_id=run_id,
        run_index=run_index,
        name=f"Case {case_id}",
        agent=agent,
        source=f"suite.jsonl:{len(case_id)}",
        duration_ms=sum(turn_ms) + 10,
        error=reasons.get(status),
        started_at=started_at,
        worker="worker-0",
    )


def one_of_each(run_id: str = "run-x") -> list[CaseResult]:
    """Six case runs: passed, failed (with an unreached checkpoint), skipped, error, timeout, and a second run of the passed case."""
    failed = result("refund-2", Status.FAILED, run_id)
    failed.checkpoints = [CheckpointResult(id="apologised", description="says sorry", reached=False)]
    return [
        result("refund-1", Status.PASSED, run_id),
        failed,
        result("await-1", Status.SKIPPED, run_id, turn_ms=(50.0,)),
        result("http-1", Status.ERROR, run_id, turn_ms=(20.0,)),
        result("slow-1", Status.TIMEOUT, run_id, turn_ms=(30_000.0,)),
        result("refund-1", Status.PASSED, run_id, run_index=1),
    ]


# Statuses of each case in the three runs of the results folder, oldest run first.
HISTORY = {
    "steady": ("passed", "passed", "passed"),
    "flaky": ("passed", "failed", "passed"),
    "regress": ("passed", "passed", "failed"),
    "fixed": ("failed", "failed", "passed"),
    "broken": ("timeout", "timeout", "timeout"),
    "waits": ("skipped", "skipped", "skipped"),
}
# Run ids that do not sort in start order, so ordering by start is what is tested.
RUN_IDS = ("run-c", "run-a", "run-b")


@pytest.fixture()
def results_dir(tmp_path: Path) -> Path:
    """``farm-results/`` with three runs written through ParquetWriter, each with a run.json."""
    root = tmp_path / "farm-results"
    for position, run_id in enumerate(RUN_IDS):
        started = START + position * 86_400
        write_run_json(root / run_id, {"run_id": run_id, "started_at": started, "agent": "support-bot",
                                       "config": {"agents": {"support-bot": {"connector": "openai"}}}})  # fmt: skip
        with ParquetWriter(root / run_id) as writer:
            for offset, (case_id, statuses) in enumerate(HISTORY.items()):
                writer.write(result(case_id, Status(statuses[position]), run_id, started_at=started + offset))
    return root


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


class IdText(HTMLParser):
    """Text of every element that has an id, and every ``details.case`` element's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.cases: list[dict[str, str | None]] = []
        self._open: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "details" and "case" in (attributes.get("class") or "").split():
            self.cases.append(attributes)
        if tag in ("meta", "br", "img", "input", "link", "rect", "line", "circle"):
            return
        self._open.append((tag, attributes.get("id")))
        if attributes.get("id"):
            self.ids[attributes["id"]] = ""

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            opened, _ = self._open.pop()
            if opened == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, element_id in self._open:
            if element_id:
                self.ids[element_id] += data


def parse_html(text: str) -> IdText:
    parser = IdText()
    parser.feed(text)
    return parser


# --- the writers share one interface -------------------------------------------


def test_report_writers_are_result_writers_with_label_and_path(tmp_path: Path):
    writers = [
        EventWriter(io.StringIO(), "r"),
        JUnitWriter(tmp_path / "junit.xml", "r"),
        HTMLWriter(tmp_path / "report.html", "r"),
    ]
    for writer in writers:
        assert isinstance(writer, ResultWriter)
        writer.close()
    assert [w.label for w in writers] == ["Events", "JUnit", "HTML"]
    assert writers[1].path == tmp_path / "junit.xml" and writers[2].path == tmp_path / "report.html"


def test_every_report_counts_what_the_run_summary_counts(tmp_path: Path):
    results = one_of_each("run-s")
    summary, stream = Summary(), io.StringIO()
    writers = [EventWriter(stream, "run-s"), JUnitWriter(tmp_path / "junit.xml", "run-s"),
               HTMLWriter(tmp_path / "report.html", "run-s")]
    for item in results:
        summary.add(item)
        for writer in writers:
            writer.write(item)
    for writer in writers:
        writer.close()

    assert (summary.total, summary.passed, summary.failed, summary.skipped, summary.errors, summary.timeouts) == (
        6, 2, 1, 1, 1, 1
    )
    events = json.loads(stream.getvalue().splitlines()[-1])
    assert events["counts"] == summary.count_dict() and events["pass_rate"] == summary.pass_rate == 0.4
    assert events["total_turns"] == summary.total_turns and events["exit_code"] == summary.exit_code
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.get("tests") == str(summary.total) and suite.get("skipped") == str(summary.skipped)
    assert suite.get("errors") == str(summary.errors + summary.timeouts)
    assert float(suite.get("time") or 0) == round(summary.span_seconds or 0, 3)
    page = parse_html((tmp_path / "report.html").read_text(encoding="utf-8")).ids
    assert {status.value: int(page[f"count-{status.value}"]) for status in Status} == {
        status.value: count for status, count in summary.counts.items()
    }
    assert (page["total-turns"], page["total-tokens"]) == (str(summary.total_turns), str(summary.total_tokens))


# --- JUnit -----------------------------------------------------------------------


def test_junit_counts_failures_errors_skipped_and_transcript(tmp_path: Path):
    path = tmp_path / "out" / "junit.xml"
    writer = JUnitWriter(path, "run-7")
    for item in one_of_each("run-7"):
        writer.write(item)
    writer.close()

    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    for element in (root, suite):
        assert (element.get("tests"), element.get("failures"), element.get("errors"), element.get("skipped")) == (
            "6",
            "1",
            "2",
            "1",
        )
        assert float(element.get("time")) >= 0 and element.get("timestamp")
    assert suite.find("properties/property[@name='run_id']").get("value") == "run-7"

    cases = {case.get("name"): case for case in suite.findall("testcase")}
    assert len(suite.findall("testcase")) == 6
    assert set(cases) == {
        "refund-1 — Case refund-1",
        "refund-1 — Case refund-1 run 2",
        "refund-2 — Case refund-2",
        "await-1 — Case await-1",
        "http-1 — Case http-1",
        "slow-1 — Case slow-1",
    }
    assert all(case.get("classname").startswith("support-bot.") for case in cases.values())
    assert cases["refund-1 — Case refund-1"].get("time") == "0.410"

    passed = cases["refund-1 — Case refund-1"]
    assert passed.find("failure") is None and passed.find("error") is None and passed.find("skipped") is None

    failure = cases["refund-2 — Case refund-2"].find("failure")
    assert failure is not None
    assert "expected the reply to mention a refund" in failure.get("message")
    assert "checkpoint apologised not reached" in failure.get("message")
    assert "turn 2: contains" in failure.text

    error = cases["http-1 — Case http-1"].find("error")
    assert error.get("type") == "error" and error.get("message").startswith("the agent answered HTTP 500")
    timeout = cases["slow-1 — Case slow-1"].find("error")
    assert timeout.get("type") == "timeout" and "timed out after 30s" in timeout.get("message")

    skipped = cases["await-1 — Case await-1"].find("skipped")
    assert skipped.get("message") == "the agent awaited input and --skip-interactive is on"

    out = cases["refund-2 — Case refund-2"].find("system-out").text
    assert "user: I want a refund for order 42" in out
    assert 'tool: lookup_order({"order": 42}) -> {"status": "shipped"} (mocked)' in out
    assert "agent: Your refund is on its way." in out
    assert '✗ contains "refund" — expected the reply to mention a refund' in out
    assert "✗ apologised not reached — says sorry" in out


def test_junit_strips_characters_xml_cannot_hold(tmp_path: Path):
    path = tmp_path / "junit.xml"
    with_controls = result("ctl-1", Status.FAILED, output="bell\x07 nul\x00 esc\x1b[0m <b>&amp;</b>")
    with_controls.error = "bad\x0bbyte"
    writer = JUnitWriter(path, "r")
    writer.write(with_controls)
    writer.close()

    raw = path.read_text(encoding="utf-8")
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", raw)
    out = ET.parse(path).getroot().find("testsuite/testcase/system-out").text
    assert "agent: bell nul esc[0m <b>&amp;</b>" in out
    assert "error: badbyte" in out


def test_junit_streams_testcases_to_a_temporary_file_and_cleans_up(tmp_path: Path):
    path = tmp_path / "junit.xml"
    writer = JUnitWriter(path, "r")
    writer.write(result("a", Status.PASSED))
    writer.flush()
    assert not path.exists()  # the document is assembled at close
    temporary = [p for p in tmp_path.iterdir() if p.name.endswith(".cases")]
    assert len(temporary) == 1 and "<testcase" in temporary[0].read_text(encoding="utf-8")
    writer.close()
    writer.close()  # twice is fine
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]
    with pytest.raises(ValueError, match="closed"):
        writer.write(result("b", Status.PASSED))


def test_junit_with_no_cases_is_a_valid_empty_suite(tmp_path: Path):
    path = tmp_path / "junit.xml"
    JUnitWriter(path, "r").close()
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("tests") == "0" and suite.findall("testcase") == []


# --- NDJSON events ------------------------------------------------------------------


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushes: list[int] = []

    def flush(self) -> None:
        self.flushes.append(self.getvalue().count("\n"))
        super().flush()


def test_events_are_ndjson_with_start_results_and_summary():
    stream = CountingStream()
    clock = iter(range(100, 200))
    writer = EventWriter(stream, "run-9", clock=lambda: float(next(clock)))
    writer.start({"agent": "support-bot", "cases": 5})
    results = one_of_each("run-9")
    for item in results:
        writer.write(item)
        assert stream.getvalue().endswith("\n") and stream.flushes[-1] == stream.getvalue().count("\n")
    writer.close()
    writer.close()

    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["run_start", *["case_result"] * 6, "summary"]
    assert all(e["run_id"] == "run-9" and isinstance(e["time"], float) for e in events)
    assert events[0]["agent"] == "support-bot" and events[0]["cases"] == 5 and events[0]["schema_version"] == SCHEMA_VERSION
    assert events[2]["case"] == results[1].model_dump(mode="json")
    assert CaseResult.model_validate(events[1]["case"]).id == "refund-1"
    summary = events[-1]
    assert summary["counts"] == {"total": 6, "passed": 2, "failed": 1, "skipped": 1, "error": 1, "timeout": 1}
    assert summary["pass_rate"] == pytest.approx(2 / 5)
    assert summary["total_turns"] == 2 * 3 + 3 * 1
    assert summary["tokens"] == {"prompt": 90, "completion": 45, "total": 135}
    assert summary["exit_code"] == 1
    with pytest.raises(ValueError, match="closed"):
        writer.write(results[0])


def test_events_emit_run_start_lazily_and_optional_shapes():
    stream = io.StringIO()
    writer = EventWriter(stream, "r")
    writer.case_start("c1", "Case one")
    writer.turn("c1", TurnResult(turn=1, input="hi", output="hello"))
    writer.close()
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [e["event"] for e in events] == ["run_start", "case_start", "turn", "summary"]
    assert events[1]["case_id"] == "c1" and events[1]["run_index"] == 0 and events[1]["attempt"] == 1
    assert events[2]["turn"]["output"] == "hello"
    assert events[3]["counts"]["total"] == 0 and events[3]["pass_rate"] is None and events[3]["exit_code"] == 0


def test_events_keep_their_own_keys_when_info_collides():
    stream = io.StringIO()
    writer = EventWriter(stream, "real")
    writer.start({"run_id": "fake", "event": "nope", "input": "suite.jsonl"})
    first = json.loads(stream.getvalue().splitlines()[0])
    assert first["event"] == "run_start" and first["run_id"] == "real" and first["input"] == "suite.jsonl"


# --- HTML ------------------------------------------------------------------------------


def test_html_holds_the_numbers_in_elements_with_ids(tmp_path: Path):
    path = tmp_path / "report.html"
    writer = HTMLWriter(path, "run-5")
    results = one_of_each("run-5")
    results[0].turns[0].output = "<script>alert('x')</script> & done"
    for item in results:
        writer.write(item)
    assert not path.exists()
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]

    text = path.read_text(encoding="utf-8")
    page = parse_html(text)
    expected = {
        "count-total": "6",
        "count-passed": "2",
        "count-failed": "1",
        "count-skipped": "1",
        "count-error": "1",
        "count-timeout": "1",
        "pass-rate": "40.0%",
        "total-turns": "9",
        "total-tokens": "135",
        "prompt-tokens": "90",
        "completion-tokens": "45",
        "run-id": "run-5",
        "latency-max": "30000 ms",
    }
    assert {key: page.ids.get(key) for key in expected} == expected
    assert len(page.cases) == 6
    assert [c["data-status"] for c in page.cases] == ["passed", "failed", "skipped", "error", "timeout", "passed"]
    assert len({c["id"] for c in page.cases}) == 6
    assert "open" not in page.cases[0] and "open" in page.cases[1]  # cases that need a look start open
    assert "<script>alert" not in text and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; done" in text
    assert "lookup_order" in text and "&quot;order&quot;: 42" in text  # tool call with its arguments
    assert "expected the reply to mention a refund" in text and "apologised" in text
    assert 'id="status-chart"' in text and 'id="latency-chart"' in text
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)  # nothing fetched from the network
    assert "<script>" in text and 'id="filter-failed"' in text


def test_html_names_each_cases_suite_when_the_run_has_several(tmp_path: Path):
    several, one = tmp_path / "several.html", tmp_path / "one.html"
    writer = HTMLWriter(several, "run-s")
    for source, status in (("suites/a.jsonl:1", Status.PASSED), ("suites/b.jsonl:1", Status.FAILED)):
        writer.write(case_result("greet", status, source=source))
    writer.close()
    text = several.read_text(encoding="utf-8")
    assert [(case["data-case-id"], case["data-suite"]) for case in parse_html(text).cases] == [
        ("greet", "suites/a.jsonl"), ("greet", "suites/b.jsonl"),
    ]  # fmt: skip
    assert '<span class="suite">suites/b.jsonl</span><code>greet</code>' in text
    assert "span.suite { display: inline;" in text  # two greet told apart on the page
    writer = HTMLWriter(one, "run-o")
    writer.write(case_result("greet", Status.PASSED, source="suites/a.jsonl:1"))
    writer.close()
    assert "span.suite { display: inline;" not in one.read_text(encoding="utf-8")


def test_html_latency_histogram_counts_turns_per_bucket(tmp_path: Path):
    path = tmp_path / "report.html"
    writer = HTMLWriter(path, "r")
    writer.write(result("a", Status.PASSED, turn_ms=(50.0, 120.0, 130.0, 70_000.0)))
    writer.close()
    chart = re.search(r'<svg id="latency-chart".*?</svg>', path.read_text(encoding="utf-8")).group(0)
    titles = dict(re.findall(r"<title>([^<]+): (\d+)</title>", chart))
    assert titles["&lt;100ms"] == "1" and titles["100–250ms"] == "2" and titles["≥60s"] == "1"
    assert titles["1–2s"] == "0"


# --- the dataset --------------------------------------------------------------------------


def test_results_folder_reads_as_one_dataset_with_pyarrow_and_duckdb(results_dir: Path):
    cases = ds.dataset(sorted(glob.glob(f"{results_dir}/*/cases.parquet")), format="parquet").to_table()
    assert cases.num_rows == 3 * len(HISTORY)
    per_run = {
        row["run_id"]: row["count_all"] for row in cases.group_by("run_id").aggregate([([], "count_all")]).to_pylist()
    }
    assert per_run == {run_id: len(HISTORY) for run_id in RUN_IDS}
    for table, schema in (("cases", CASES_SCHEMA), ("turns", TURNS_SCHEMA), ("assertions", ASSERTIONS_SCHEMA)):
        assert pq.read_schema(results_dir / "run-a" / f"{table}.parquet").names == schema.names

    rows = duckdb.sql(
        f"select run_id, count(*) filter (status = 'passed'), count(*) "
        f"from read_parquet('{results_dir}/*/cases.parquet') group by run_id order by run_id"
    ).fetchall()
    assert rows == [("run-a", 2, 6), ("run-b", 3, 6), ("run-c", 3, 6)]
    turns = duckdb.sql(
        f"select count(*), count(distinct run_id) from read_parquet('{results_dir}/*/turns.parquet')"
    ).fetchall()
    assert turns == [(3 * len(HISTORY) * 2, 3)]
    tools = duckdb.sql(
        f"select tool, count(*) from (select unnest(tool_calls).name as tool "
        f"from read_parquet('{results_dir}/*/turns.parquet')) group by tool"
    ).fetchall()
    assert tools == [("lookup_order", 3 * len(HISTORY))]


# --- analysis ----------------------------------------------------------------------------------


def test_analysis_of_a_results_folder(results_dir: Path):
    report = analyse([results_dir])

    assert [run.run_id for run in report.runs] == list(RUN_IDS)  # by start time, not by name
    assert report.runs[0].path == str(results_dir / "run-c") and report.runs[0].agent == "support-bot"
    assert [run.counts.failed for run in report.runs] == [1, 2, 1]
    counts = report.summary.counts
    assert (counts.total, counts.passed, counts.failed, counts.skipped, counts.error, counts.timeout) == (
        18,
        8,
        4,
        3,
        0,
        3,
    )
    assert counts.pass_rate == pytest.approx(8 / 15)
    assert report.summary.turns == 36 and report.summary.total_tokens == 18 * 30

    assert [(t.agent, t.connector, t.role, t.cases, t.total_tokens) for t in report.tokens] == [
        ("support-bot", "openai", "target", 18, 540)
    ]
    assert [(row.group, row.turns, row.p50_ms, row.max_ms) for row in report.latency_by_turn] == [
        ("1", 18, 100.0, 100.0),
        ("2", 18, 300.0, 300.0),
    ]
    (by_agent,) = report.latency_by_agent
    assert (by_agent.group, by_agent.turns, by_agent.p50_ms, by_agent.p99_ms) == ("support-bot", 36, 200.0, 300.0)

    (top,) = report.failed_assertions
    # every case run that did not pass fails its last-turn assertion: 4 failed + 3 timeout + 3 skipped
    assert (top.type, top.message, top.count, top.cases) == (
        "contains",
        "expected the reply to mention a refund",
        10,
        5,
    )

    stability = report.stability
    assert stability.repeated and stability.cases == 5  # "waits" never ran
    assert [c.case_id for c in stability.flaky] == ["fixed", "flaky", "regress"]
    assert stability.flaky_total == 3
    flaky = {c.case_id: c for c in stability.flaky}["flaky"]
    assert (flaky.runs, flaky.passes, flaky.failures, flaky.pass_rate) == (3, 2, 1, pytest.approx(2 / 3))
    assert flaky.statuses == {"failed": 1, "passed": 2} and flaky.stability_class == "unstable"
    assert stability.classes == {"stable": 1, "mostly_stable": 0, "unstable": 2, "highly_unstable": 1, "consistently_failing": 1}
    assert stability.least_stable[0].case_id == "broken" and stability.least_stable[0].pass_rate == 0.0
    assert stability.least_stable[0].stability_class == "consistently_failing"  # never passed: failing, not flaky

    comparison = report.comparison
    assert (comparison.base_run, comparison.head_run) == ("run-a", "run-b")
    assert [(c.case_id, c.base_status, c.head_status) for c in comparison.regressions] == [
        ("regress", "passed", "failed")
    ]
    assert [(c.case_id, c.base_status, c.head_status) for c in comparison.fixes] == [
        ("fixed", "failed", "passed"),
        ("flaky", "failed", "passed"),
    ]
    assert (comparison.regressions_total, comparison.fixes_total) == (1, 2)


def test_two_named_runs_are_compared_with_each_other(results_dir: Path):
    report = analyse([results_dir / "run-a", results_dir / "run-c"])  # named newest first
    assert [run.run_id for run in report.runs] == ["run-c", "run-a"]
    assert report.comparison.base_run == "run-c" and report.comparison.head_run == "run-a"
    assert [c.case_id for c in report.comparison.regressions] == ["flaky"]
    assert report.comparison.fixes == []


def test_one_run_has_no_comparison_and_no_flaky_cases(results_dir: Path):
    report = analyse([results_dir / "run-b" / "cases.parquet"])
    assert [run.run_id for run in report.runs] == ["run-b"]
    assert report.comparison is None
    assert not report.stability.repeated and report.stability.flaky == []
    assert report.summary.counts.passed == 3


def test_repetitions_in_one_run_count_toward_flakiness(tmp_path: Path):
    with ParquetWriter(tmp_path / "run") as writer:
        for index, status in enumerate((Status.PASSED, Status.FAILED, Status.PASSED, Status.PASSED)):
            writer.write(result("wobbly", status, "run", run_index=index))
    report = analyse([tmp_path / "run"])
    (case,) = report.stability.flaky
    assert (case.case_id, case.runs, case.passes, case.pass_rate) == ("wobbly", 4, 3, 0.75)
    assert case.stability_class == "unstable"


def test_top_cuts_lists_and_zero_keeps_them_all(tmp_path: Path):
    with ParquetWriter(tmp_path / "run") as writer:
        for n in range(5):
            item = result(f"c{n}", Status.FAILED, "run")
            item.turns[-1].assertions[0].message = f"message {n}"
            writer.write(item)
            writer.write(result(f"c{n}", Status.PASSED, "run", run_index=1))
    cut = analyse([tmp_path / "run"], top=2)
    assert len(cut.failed_assertions) == 2 and cut.failed_assertions_total == 5
    assert len(cut.stability.flaky) == 2 and cut.stability.flaky_total == 5
    assert len(analyse([tmp_path / "run"], top=0).failed_assertions) == 5


def test_analysis_reads_a_results_jsonl_file(tmp_path: Path):
    path = tmp_path / "results.jsonl"
    with JSONLWriter(path) as writer:
        for item in one_of_each("run-j"):
            writer.write(item)
    report = analyse([path])
    assert report.runs[0].run_id == "run-j" and report.runs[0].path == str(path)
    assert report.summary.counts.total == 6 and report.summary.counts.timeout == 1
    assert report.missed_checkpoints[0].checkpoint_id == "apologised"
    assert report.latency_by_turn[0].turns == 6


def test_missing_or_empty_paths_are_usage_errors(tmp_path: Path):
    with pytest.raises(UsageError, match="does not exist"):
        analyse([tmp_path / "nowhere"])
    with pytest.raises(UsageError, match="no cases.parquet"):
        analyse([tmp_path])
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(UsageError, match="nor a .parquet or .jsonl file"):
        analyse([tmp_path / "notes.txt"])
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    with pytest.raises(UsageError, match="no case results .*other.parquet lacks the columns .*case_id"):
        analyse([tmp_path / "other.parquet"])


def test_unconsolidated_runs_are_noted_and_skipped(results_dir: Path):
    live = results_dir / "run-live"
    writer = ParquetWriter(live)
    writer.write(result("steady", Status.PASSED, "run-live"))
    writer.flush()  # parts only: the run has not ended
    report = analyse([results_dir])
    assert "run-live" not in [run.run_id for run in report.runs]
    assert any("run-live" in note for note in report.notes)
    with pytest.raises(UsageError, match="not consolidated"):
        analyse([live])
    writer.close()
    assert "run-live" in [run.run_id for run in analyse([results_dir]).runs]


def test_analysis_of_two_large_runs_counts_every_case_turn_and_assertion(tmp_path: Path):
    """Two runs of 10,000 cases and 30,000 turns each (its time at 100k: benchmarks/scale.py and view.py)."""
    n, turns_per_case = 10_000, 3
    ids = [f"case-{i}" for i in range(n)]
    statuses = ["passed", "failed", "passed", "skipped", "passed", "error", "passed", "timeout"]

    def table(schema: pa.Schema, rows: int, **columns) -> pa.Table:
        arrays = {f.name: columns[f.name] if f.name in columns else pa.nulls(rows, f.type) for f in schema}
        return pa.table(arrays).cast(schema)

    for run_id in ("bulk-1", "bulk-2"):
        folder = tmp_path / run_id
        folder.mkdir()
        shift = 0 if run_id == "bulk-1" else 1
        pq.write_table(table(
            CASES_SCHEMA, n, run_id=pa.array([run_id] * n), run_index=pa.array([0] * n), attempt=pa.array([1] * n),
            case_id=pa.array(ids), status=pa.array([statuses[(i + shift) % 8] for i in range(n)]),
            agent=pa.array(["bot-a", "bot-b"] * (n // 2)), tags=pa.array([[]] * n, CASES_SCHEMA.field("tags").type),
            total_turns=pa.array([turns_per_case] * n), duration_ms=pa.array([float(i % 997) for i in range(n)]),
            total_tokens=pa.array([i % 50 for i in range(n)]),
        ), folder / "cases.parquet")  # fmt: skip
        m = n * turns_per_case
        pq.write_table(table(
            TURNS_SCHEMA, m, run_id=pa.array([run_id] * m), run_index=pa.array([0] * m), attempt=pa.array([1] * m),
            case_id=pa.array([case for case in ids for _ in range(turns_per_case)]),
            turn=pa.array([1, 2, 3] * n), duration_ms=pa.array([float(i % 1009) for i in range(m)]),
            tool_calls=pa.array([[]] * m, TURNS_SCHEMA.field("tool_calls").type),
        ), folder / "turns.parquet")  # fmt: skip
        pq.write_table(table(
            ASSERTIONS_SCHEMA, m, run_id=pa.array([run_id] * m), run_index=pa.array([0] * m), attempt=pa.array([1] * m),
            case_id=pa.array([case for case in ids for _ in range(turns_per_case)]), scope=pa.array(["turn"] * m),
            type=pa.array(["contains", "regex", "json_path"] * n), passed=pa.array([i % 10 != 0 for i in range(m)]),
            message=pa.array([f"m{i % 7}" for i in range(m)]), negate=pa.array([False] * m), error=pa.array([False] * m),
            position=pa.array([0] * m),
        ), folder / "assertions.parquet")  # fmt: skip

    report = analyse([tmp_path])
    assert report.summary.counts.total == 2 * n
    assert report.latency_by_turn[0].turns == 2 * n
    assert report.comparison.regressions_total > 0 and report.stability.flaky_total > 0


# --- farm report (CLI) ------------------------------------------------------------------------


def test_farm_report_prints_tables(results_dir: Path):
    outcome = invoke("report", str(results_dir))
    assert outcome.exit_code == 0, outcome.output
    out = outcome.output
    assert "Runs (3, oldest first)" in out
    assert re.search(r"Passed:\s+8\b", out) and re.search(r"Case runs:\s+18\b", out)
    assert "Turn latency per agent" in out and "Turn latency per turn index" in out
    assert "expected the reply to mention a refund" in out
    assert "Flaky cases" in out and "Cases that changed from run-a to run-b: 1 passed -> failed, 2 failed -> passed" in out
    assert "by chance too: whether the runs differ as a whole is their paired difference" in out
    regressions = out.split("Passed -> failed", 1)[1].split("Failed -> passed", 1)[0]
    assert "regress" in regressions and "fixed" not in regressions
    assert "fixed — Case fixed" in out.split("Failed -> passed", 1)[1]


def test_farm_report_json_is_one_document(results_dir: Path):
    outcome = invoke("report", str(results_dir), "--json", "--top", "1")
    assert outcome.exit_code == 0
    document = json.loads(outcome.stdout)
    assert document["schema_version"] == 2
    assert document["summary"]["counts"]["total"] == 18
    assert [run["run_id"] for run in document["runs"]] == list(RUN_IDS)
    assert document["comparison"]["regressions"][0]["case_id"] == "regress"
    assert len(document["stability"]["flaky"]) == 1 and document["stability"]["flaky_total"] == 3


def test_farm_report_problems_are_one_sentence_and_exit_2(tmp_path: Path):
    outcome = invoke("report", str(tmp_path / "missing"))
    assert outcome.exit_code == 2
    assert "error:" in outcome.output and "does not exist" in outcome.output
    assert "Traceback" not in outcome.output
    empty = invoke("report", str(tmp_path))
    assert empty.exit_code == 2 and "no cases.parquet" in empty.output


# --- the CI recipe ------------------------------------------------------------------------------


def test_github_workflow_gates_the_suite_keeps_reports_and_comments_the_summary():
    workflow = yaml.safe_load((ROOT / "deploy" / "github-actions.yml").read_text(encoding="utf-8"))
    steps = workflow["jobs"]["farm"]["steps"]
    uses = [step.get("uses", "") for step in steps]
    assert any(u.startswith("actions/checkout@") for u in uses)
    setup = next(step for step in steps if step.get("uses", "").startswith("actions/setup-python@"))
    assert str(setup["with"]["python-version"]) == "3.11"
    runs = [step.get("run", "") for step in steps]
    assert any(r.strip() == "pip install ." for r in runs)
    test_index, test_step = next((i, r) for i, r in enumerate(runs) if r.startswith("farm test"))
    assert "-i tests/suite.jsonl" in test_step and "--junit farm-junit.xml" in test_step and "--html farm-report.html" in test_step
    assert "--runs 5 --min-pass-rate 0.8 --baseline last" in test_step  # the gate; its summary goes to GITHUB_STEP_SUMMARY itself
    restore = uses.index("actions/cache/restore@v4")
    save = uses.index("actions/cache/save@v4")
    assert restore < test_index < save and steps[save]["if"] == "always()"  # the earlier runs are there for --baseline last
    assert steps[restore]["with"]["path"] == steps[save]["with"]["path"] == "farm-results"
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert "farm-junit.xml" in upload["with"]["path"] and "farm-report.html" in upload["with"]["path"]
    comment = next(step for step in steps if "gh pr comment" in step.get("run", ""))
    assert "farm report farm-results --format md > farm-summary.md" in comment["run"] and "--body-file farm-summary.md" in comment["run"]
    assert workflow["permissions"]["pull-requests"] == "write"


def test_cases_with_the_same_id_in_different_suites_are_kept_apart(tmp_path: Path):
    root = tmp_path / "farm-results"
    for position, run_id in enumerate(("run-1", "run-2")):
        write_run_json(root / run_id, {"run_id": run_id, "started_at": START + position})
        with ParquetWriter(root / run_id) as writer:
            for suite, status in (("billing.jsonl", Status.PASSED), ("refunds.jsonl", Status.FAILED)):
                one = result("greet", status, run_id, started_at=START + position)
                one.source = f"suites/{suite}:{3 + position}"  # the line may move between runs
                writer.write(one)
    report = analyse([root])
    stability = report.stability
    assert stability.cases == 2 and stability.flaky_total == 0  # one always passes, the other always fails
    (failing,) = stability.least_stable
    assert (failing.case_id, failing.suite, failing.stability_class) == ("greet", "suites/refunds.jsonl", "consistently_failing")
    assert report.comparison is not None and report.comparison.regressions_total == 0
    assert "0 passed -> failed" in invoke("report", str(root)).output  # one case regressing while another fixed itself, before


def test_an_assertion_failing_in_two_suites_case_of_one_id_failed_in_two_cases(tmp_path: Path):
    with ParquetWriter(tmp_path / "run") as writer:
        for suite in ("billing.jsonl", "refunds.jsonl"):
            for index in range(2):
                one = result("greet", Status.FAILED, "run", run_index=index)
                one.source = f"suites/{suite}:1"
                writer.write(one)
    (top,) = analyse([tmp_path / "run"]).failed_assertions
    assert (top.count, top.cases) == (4, 2)  # 4 failures, in two cases named greet: not one


def test_a_damaged_run_is_reported_as_far_as_it_reads_and_its_problems_are_notes(results_dir: Path):
    (results_dir / "run-a" / "run.json").write_text(json.dumps({"run_id": "run-a", "started_at": "noon", "runs": float("nan")}))
    turns = results_dir / "run-b" / "turns.parquet"
    turns.write_bytes(turns.read_bytes()[:64])
    report = analyse([results_dir])
    assert [run.run_id for run in report.runs] == ["run-c", "run-a", "run-b"]  # run-a's start: its first case's
    assert report.summary.counts.total == 3 * len(HISTORY)
    assert any(note.startswith("run-a: ") and "started_at is text, not a number" in note for note in report.notes)
    assert any(note.startswith("run-b: ") and "turns.parquet cannot be read" in note for note in report.notes)
    done = invoke("report", str(results_dir))
    assert done.exit_code == 0 and "note: run-b: " in done.output and "Traceback" not in done.output
    cases = results_dir / "run-c" / "cases.parquet"
    cases.write_bytes(b"")
    with pytest.raises(UsageError, match="no case results in .*run-c.* cannot be read"):
        analyse([results_dir / "run-c"])  # the run named has no case that can be read: no report, never an empty one


# --- the trend: the pass rate per agent per run ------------------------------------------


def test_the_trend_of_a_results_folder_is_each_agents_pass_rate_per_run_oldest_first(tmp_path: Path):
    from tests.farm.test_read_runs import write_run

    results = tmp_path / "results"
    write_run(results / "b-run", "b-run", {"bot": [True, False], "other": [False, False]}, started=1.7e9 + 60, verdict="failed")
    write_run(results / "a-run", "a-run", {"bot": [True, True], "other": [True, False]}, started=1.7e9 + 120)
    write_run(results / "c-run", "c-run", {"bot": [False, False], "other": [True, True]}, started=1.7e9)
    report = analyse([results])
    assert [(point.run_id, point.agent, point.pass_rate, point.verdict) for point in report.trend] == [
        ("c-run", "bot", 0.0, "passed"), ("c-run", "other", 1.0, "passed"),
        ("b-run", "bot", 0.5, "failed"), ("b-run", "other", 0.0, "failed"),
        ("a-run", "bot", 1.0, "passed"), ("a-run", "other", 0.5, "passed"),
    ]  # fmt: skip
    assert [run.run_id for run in report.runs] == ["c-run", "b-run", "a-run"]  # the same order as the runs table
    out = invoke("report", str(results))
    assert "Pass rate trend" in out.output
    section = out.output.split("Pass rate trend")[1].split("Summary")[0]
    rows = {line.split()[0]: line.split()[3:] for line in section.splitlines() if line.strip().endswith("%")}
    assert list(rows) == ["c-run", "b-run", "a-run"]  # a run a row, the newest last
    assert rows == {"c-run": ["0.0%", "100.0%"], "b-run": ["50.0%", "0.0%"], "a-run": ["100.0%", "50.0%"]}
    assert json.loads(invoke("report", str(results), "--json").output)["trend"][0]["run_id"] == "c-run"


def test_a_stopped_run_with_nothing_left_to_run_is_not_said_to_miss_0_of_its_case_runs():
    from farm.reports.analysis import _unfinished
    from farm.reports.models import RunSummary, StatusCounts

    said = _unfinished(RunSummary(run_id="r1", status="stopped", not_run=0, counts=StatusCounts(total=1)))
    assert said == "run r1 is stopped; its figures are of the 1 case run it ended."


def trend_lines(report: Report, width: int) -> list[str]:
    """The trend table as a console of ``width`` columns prints it (as a terminal, or piped)."""
    from farm.cli.report import _trend

    out = io.StringIO()
    _trend(report, Console(file=out, width=width, highlight=False, color_system=None))
    return out.getvalue().splitlines()


@pytest.mark.parametrize("width", [80, PIPE_WIDTH])
def test_the_trend_of_runs_started_in_one_minute_tells_each_run_apart_at_80_columns_and_piped(tmp_path: Path, width: int):
    from tests.farm.test_read_runs import write_run

    results = tmp_path / "results"
    for n in range(14):  # 14 runs a few seconds apart, as a loop of farm test makes them
        passes = [index < n % 5 for index in range(4)]
        write_run(results / f"run-{n:02d}", f"20261206-0523{n:02d}-abc{n:03d}", {"support-bot": passes, "billing-assistant": [True, *passes[1:]]}, started=1.7e9 + 4 * n)
    report = analyse([results])
    lines = trend_lines(report, width)
    assert max(len(line) for line in lines) <= width
    assert "the latest 12 of 14 runs" in lines[1] and "… and 2 older runs (--json has every run's)" in lines[-1]
    header = next(line for line in lines if line.lstrip().startswith("Run"))
    assert header.split() == ["Run", "Started", "billing-assistant", "support-bot"]
    rows = [line.split() for line in lines if line.lstrip().startswith("20261206-")]
    assert [row[0] for row in rows] == [f"20261206-0523{n:02d}-abc{n:03d}" for n in range(2, 14)]  # the newest last
    assert [row[2] for row in rows[:2]] == ["22:13:28", "22:13:32"]  # to the second: the same minute, two runs
    for n, row in zip(range(2, 14), rows, strict=True):
        passed = n % 5
        assert row[3:] == [f"{(passed + (passed == 0)) / 4:.1%}", f"{passed / 4:.1%}"]  # every figure whole


def test_the_runs_table_tells_apart_two_runs_started_in_one_minute(tmp_path: Path):
    from datetime import datetime

    from tests.farm.test_read_runs import write_run

    results = tmp_path / "results"
    for n in range(2):
        write_run(results / f"r{n}", f"run-{n}", {"bot": [True]}, started=1.7e9 + 4 * n)
    section = invoke("report", str(results)).output.split("Pass rate trend")[0]
    rows = {line.split()[0]: line.split()[1] for line in section.splitlines() if line.lstrip().startswith("run-")}
    assert rows == {f"run-{n}": f"{datetime.fromtimestamp(1.7e9 + 4 * n).astimezone():%H:%M:%S}" for n in range(2)}
    assert f"Runs (2, oldest first, {datetime.fromtimestamp(1.7e9).astimezone():%Y-%m-%d})" in section  # one day: the title has it


def test_the_runs_table_says_how_a_run_that_stopped_ended_and_a_run_with_no_result_is_noted(tmp_path: Path):
    from farm.writers.runinfo import read_run_json, write_run_json
    from tests.farm.test_read_runs import write_run

    results = tmp_path / "results"
    write_run(results / "r0", "run-0", {"bot": [True, True]}, started=1.7e9)
    stopped = write_run(results / "r1", "run-1", {"bot": [True]}, started=1.7e9 + 60)
    info = read_run_json(stopped)
    info.status, info.cases, info.runs = "stopped", 4, 1
    write_run_json(stopped, info)
    (results / "r2").mkdir()
    write_run_json(results / "r2", {"run_id": "run-2", "status": "interrupted", "started_at": 1.7e9 + 120})  # before any case ended
    out = invoke("report", str(results)).output
    section = out.split("Pass rate trend")[0]
    ended = {line.split()[0]: line.split()[-1] for line in section.splitlines() if line.lstrip().startswith("run-") and "%" in line}
    assert ended == {"run-0": "finished", "run-1": "stopped"}, section  # at 80 columns too
    assert "note: run run-1 is stopped" in out
    assert "note: Skipped 1 run folder(s) with no case result (stopped or interrupted before a case ended): r2" in " ".join(out.split())


def test_the_trend_of_more_agents_than_fit_side_by_side_is_a_row_per_run_and_agent(tmp_path: Path):
    from tests.farm.test_read_runs import write_run

    results = tmp_path / "results"
    agents = [f"assistant-number-{n}" for n in range(5)]
    for n in range(3):
        write_run(results / f"r{n}", f"20261206-05230{n}-def000", {agent: [True, n > 0] for agent in agents}, started=1.7e9 + n)
    lines = trend_lines(analyse([results]), 80)
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if line.lstrip().startswith("Run"))
    assert header.split() == ["Run", "Started", "Agent", "Pass", "rate"]
    rows = [line.split() for line in lines if line.lstrip().startswith("20261206-")]
    assert len(rows) == 15 and {row[3] for row in rows} == set(agents)
    assert [row[4] for row in rows if row[0] == "20261206-052300-def000"] == ["50.0%"] * 5
    assert [row[4] for row in rows if row[0] == "20261206-052302-def000"] == ["100.0%"] * 5


def test_a_case_id_two_suites_of_a_run_use_is_a_row_per_suite_and_names_its_suite_where_the_other_is_not_listed(tmp_path: Path):
    with ParquetWriter(tmp_path / "run") as writer:  # farm test -i suites/a.jsonl -i suites/b.jsonl --runs 2
        for suite, status in (("a.jsonl", Status.PASSED), ("b.jsonl", Status.FAILED)):
            for index in range(2):
                for case_id in ("greets", f"{suite[0]}-other"):
                    one = result(case_id, status, "run", run_index=index)
                    one.source = f"suites/{suite}:1"
                    writer.write(one)
    report = analyse([tmp_path / "run"])
    assert report.shared_case_ids == ["greets"]
    assert [(row.case_id, row.suite, row.runs, row.passes) for row in report.stability.least_stable] == [
        ("b-other", "suites/b.jsonl", 2, 0), ("greets", "suites/b.jsonl", 2, 0),
    ]  # fmt: skip
    assert invoke("report", str(tmp_path / "run")).exit_code == 0
    printed = io.StringIO()
    render(report, Console(file=printed, width=PIPE_WIDTH, highlight=False, color_system=None))
    per_case = printed.getvalue().split("Pass rate per case")[1]
    assert "greets — Case greets (suites/b.jsonl)" in per_case  # a.jsonl's greets passed: it is not listed, and this one is not it
    assert "b-other — Case b-other " in per_case and "b-other — Case b-other (" not in per_case  # an id of one suite: no suite
