"""Results that know their agent: the summary, the console, the NDJSON events, the HTML and JUnit
reports of a run of several agents under test, and of one agent exactly as before."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console

from farm._run.events import EventWriter
from farm.console import ConsoleReporter
from farm.reports import HTMLWriter, JUnitWriter
from farm.results import AssertionResult, CaseResult, Status, TurnResult
from farm.summary import Summary
from tests.factories import case_result
from tests.farm.test_reports import parse_html


def run_of(agent: str, case_id: str, status: Status, run_index: int = 0, cost: float | None = None) -> CaseResult:
    passed = status is Status.PASSED
    turn = TurnResult(
        turn=1, input="Hello", output="Hi there",
        assertions=[AssertionResult(type="contains", expected="hi", passed=passed, message=None if passed else "no")],
        cost_usd=cost,
    )  # fmt: skip
    return case_result(case_id, status, [turn], agent=agent, run_index=run_index, cost_usd=cost, run_id="run-2")


def two_agents() -> list[CaseResult]:
    return [
        run_of("v1", "greet", Status.PASSED, cost=0.001),
        run_of("v2", "greet", Status.FAILED, cost=0.002),
        run_of("v1", "bye", Status.PASSED, cost=0.001),
        run_of("v2", "bye", Status.PASSED, cost=0.002),
    ]


def plain() -> Console:
    return Console(file=io.StringIO(), width=120, force_terminal=False, color_system=None)


def printed(console: Console) -> str:
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_summary_counts_each_agent_and_keeps_their_cases_apart():
    summary = Summary()
    for result in two_agents():
        summary.add(result)
    assert list(summary.agents) == ["v1", "v2"] and summary.several_agents
    assert summary.agents["v1"].count_dict()["passed"] == 2 and summary.agents["v2"].count_dict()["failed"] == 1
    assert summary.agents["v2"].pass_rate == 0.5 and summary.agents["v2"].cost_usd == 0.004
    assert summary.stability("v2")["", "greet"].passes == 0 and summary.stability("v1")["", "greet"].passes == 1
    assert summary.exit_code == 1  # over all rows


def test_the_console_names_the_agent_of_each_case_and_counts_each_agent():
    console = plain()
    reporter = ConsoleReporter(console)
    reporter.header("v1", "suite.jsonl", 2, agents=["v1", "v2"])
    summary = Summary()
    for result in two_agents():
        reporter.case(result)
        summary.add(result)
    reporter.stop_progress()
    reporter.summary(summary)
    text = printed(console)
    assert "Agents: v1, v2" in text
    assert "✓ v1 [greet]" in text and "✓ v2 [bye]" in text
    assert "► v2 [greet]" in text and "Result: FAILED on v2" in text
    table = text[text.index("Per agent"):]
    v2_row = next(line for line in table.splitlines() if line.strip(" │┃").startswith("v2"))
    assert [cell.strip() for cell in v2_row.strip(" │┃").split("│")] == ["v2", "2", "1", "1", "0", "0", "0", "50%", "$0.0040"]
    assert "Cost: $0.0060 agent under test, — simulator, judge and generator" in text


def test_the_console_turns_agent_names_on_when_a_second_agent_appears():
    console = plain()
    reporter = ConsoleReporter(console)
    for result in two_agents()[:2]:
        reporter.case(result)
    reporter.flush()
    text = printed(console)
    assert "✓ [greet]" in text and "► v2 [greet]" in text


def test_one_agent_prints_as_before():
    console = plain()
    reporter = ConsoleReporter(console)
    reporter.header("v1", "suite.jsonl", 2)
    summary = Summary()
    for result in (run_of("v1", "greet", Status.PASSED), run_of("v1", "bye", Status.FAILED)):
        reporter.case(result)
        summary.add(result)
    reporter.stop_progress()
    reporter.summary(summary)
    text = printed(console)
    assert "Agent: v1" in text and "✓ [greet]" in text and "► [bye]" in text
    assert "on v1" not in text and "Per agent" not in text and "Cost" not in text


def test_events_summary_gives_each_agent_and_the_cost():
    stream = io.StringIO()
    writer = EventWriter(stream, "run-2")
    for result in two_agents():
        writer.write(result)
    writer.close()
    summary = json.loads(stream.getvalue().splitlines()[-1])
    assert summary["cost_usd"] == 0.006 and summary["role_cost_usd"] is None
    assert summary["agents"]["v2"]["failed"] == 1 and summary["agents"]["v1"]["cost_usd"] == 0.002
    rates = {agent: counts["pass_rate"] for agent, counts in summary["agents"].items()}
    assert summary["pass_rate"] is None and None not in rates.values()  # each agent's own, never one pooled over both


def test_html_shows_each_agent_and_the_cost(tmp_path: Path):
    writer = HTMLWriter(tmp_path / "report.html", "run-2")
    for result in two_agents():
        writer.write(result)
    writer.close()
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    page = parse_html(text)
    assert page.ids["cost-usd"] == "$0.0060" and "role-cost-usd" not in page.ids
    assert [case["data-agent"] for case in page.cases] == ["v1", "v2", "v1", "v2"]
    assert "span.agent { display: inline;" in text
    row = page.ids["agent-1"]
    assert row.startswith("v2") and "$0.0040" in row


def test_html_of_one_agent_without_a_price_has_no_agents_table_nor_cost(tmp_path: Path):
    writer = HTMLWriter(tmp_path / "report.html", "run-2")
    writer.write(run_of("v1", "greet", Status.PASSED))
    writer.close()
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    page = parse_html(text)
    assert "agents" not in page.ids and "cost-usd" not in page.ids
    assert "span.agent { display: inline;" not in text


def test_junit_names_the_agent_of_each_testcase_and_its_cost(tmp_path: Path):
    writer = JUnitWriter(tmp_path / "junit.xml", "run-2")
    for result in two_agents():
        writer.write(result)
    writer.close()
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    named = [(case.get("classname"), case.get("name"), case.find("failure") is not None) for case in cases]
    assert named == [("v1", "greet", False), ("v2", "greet", True), ("v1", "bye", False), ("v2", "bye", False)]
    assert "$0.0020" in (tmp_path / "junit.xml").read_text(encoding="utf-8")
