"""Golden conversations: ``--update-golden`` writes the passed cases' conversations, a later run
compares with them (farm.conversation.golden), against a scripted agent behind a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from rich.console import Console
from typer.testing import CliRunner

import farm
from farm.cases import GoldenRule
from farm.conversation.golden import attach, compare, golden_path, safe_name
from farm.conversation.goldenfile import GoldenCheck, GoldenConversation
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import InputError, UsageError
from farm.results import CaseResult, ToolCallRecord, TurnResult
from farm.suite.loader import load_text
from tests.scripted import RoleModels, ScriptedAgent, farm_toml, roles_toml


class GoldenAgent:
    """An agent whose reply text, tool argument and JSON answer a test can change between runs.

    ``file it``: calls ``create_expense`` with ``amount``, then answers ``after_tool``;
    ``status``: answers JSON; anything else: ``reply``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.reply = "Hello! I can help you file an expense report today."
        self.after_tool = "Your expense EXP-1 is saved as a draft."
        self.amount = 3500
        self.status = '{"status": "ok", "items": [1, 2]}'

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        messages = (body or {}).get("messages") or []
        last = messages[-1] if messages else {}
        if last.get("role") == "tool":
            return Response(chat_completion(self.after_tool))
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        if text == "file it":
            return Response(chat_completion(None, [{"name": "create_expense", "arguments": {"amount": self.amount, "type": "travel"}}]))
        if text == "status":
            return Response(chat_completion(self.status))
        return Response(chat_completion(self.reply))


@pytest.fixture(scope="module")
def agent_server():
    agent = GoldenAgent()
    with JSONServer(agent) as server:
        server.agent = agent  # type: ignore[attr-defined]
        yield server


@pytest.fixture
def agent(agent_server: JSONServer) -> GoldenAgent:
    agent_server.agent.reset()  # type: ignore[attr-defined]
    return agent_server.agent  # type: ignore[attr-defined]


CASES = [
    {"id": "greet", "input": "Hello", "assertions": [{"type": "contains", "value": "expense"}]},
    {"id": "travel/file ü", "turns": [{"input": "Hello"}, {"input": "file it", "assertions": [{"type": "tool_called", "name": "create_expense"}]}]},
    {"id": "status", "input": "status", "assertions": [{"type": "json_path", "path": "$.status", "value": "ok"}]},
    {"id": "broken", "input": "Hello", "assertions": [{"type": "contains", "value": "pirate"}]},
]


def make_project(folder: Path, url: str, engine: str) -> Path:
    toml = farm_toml(url, engine=engine).replace('results_dir = "results"', 'results_dir = "results"\ngolden_dir = "golden"')
    (folder / "farm.toml").write_text(toml)
    return folder


@pytest.fixture
def project(tmp_path: Path, agent_server: JSONServer) -> Path:
    return make_project(tmp_path, agent_server.url, "local")


def write_suite(folder: Path, cases: list[dict[str, Any]], name: str = "suite.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases), encoding="utf-8")
    return path


def run(project: Path, suite: Path, **options: Any) -> tuple[farm.RunResult, str]:
    out = StringIO()
    console = Console(file=out, width=200, color_system=None)
    result = farm.run(str(suite), config=project / "farm.toml", console=console, **options)
    return result, out.getvalue()


def record(project: Path) -> Path:
    """Record the golden files of CASES; returns the golden folder."""
    suite = write_suite(project, CASES)
    result, text = run(project, suite, update_golden=project / "golden")
    assert result.exit_code == 1  # "broken" failed
    assert "golden: 3 written, 1 not passed" in text
    return project / "golden"


def results(run_result: farm.RunResult) -> dict[str, dict[str, Any]]:
    assert run_result.results is not None
    lines = run_result.results.read_text(encoding="utf-8").splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


# -- writing -----------------------------------------------------------------------------------


def test_update_golden_writes_passed_cases_only_as_readable_json(project: Path, agent: GoldenAgent):
    golden = record(project)
    files = sorted(p.relative_to(golden).as_posix() for p in golden.rglob("*.json"))
    assert files == sorted(f"suite/{safe_name(i)}.json" for i in ("greet", "travel/file ü", "status"))
    text = (golden / "suite" / f"{safe_name('travel/file ü')}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    assert data["id"] == "travel/file ü" and data["suite"] == "suite.jsonl"
    second = data["turns"][1]
    assert second["input"] == "file it" and second["reply"] == agent.after_tool
    assert second["tool_calls"][0]["name"] == "create_expense"
    assert second["tool_calls"][0]["arguments"] == {"amount": 3500, "type": "travel"}
    assert second["tool_calls"][0]["result"] == {"expense": {"id": "EXP-1", "status": "draft"}}
    assert second["awaiting_input"] is False
    assert not list(golden.rglob(".golden-*"))  # no temporary file left behind


def test_golden_file_names_stay_inside_the_folder(tmp_path: Path):
    ids = ["../../escape", "a/b", "a_b", "/abs", "..", ".", "ünïcode ✓", "Refund", "refund", "x" * 300, "con:1"]
    paths = [golden_path(tmp_path, i, "../../suite.jsonl:3") for i in ids]
    assert len(set(paths)) == len(ids)
    for path in paths:
        assert path.resolve().parent == (tmp_path / "suite").resolve()
        assert path.name.isascii() and not path.name.startswith(".") and len(path.name) < 120
    assert golden_path(tmp_path, "greet", "<message>").parent.name == safe_name("message")


# -- comparing ---------------------------------------------------------------------------------


def test_an_unchanged_agent_passes_its_golden_comparison(tmp_path: Path, agent_server: JSONServer, agent: GoldenAgent, engine: str):
    project = make_project(tmp_path, agent_server.url, engine)
    record(project)
    suite = write_suite(project, [dict(c, golden=True) for c in CASES[:3]])
    result, _ = run(project, suite)
    assert result.exit_code == 0
    rows = results(result)
    turn = rows["travel/file ü"]["turns"][1]
    golden = [a for a in turn["assertions"] if a["type"] == "golden"]
    assert len(golden) == 1 and golden[0]["passed"] and golden[0]["diff"] is None
    agent.amount = 350
    result, _ = run(project, suite)
    assert result.exit_code == 1 and results(result)["travel/file ü"]["status"] == "failed"


def test_a_slightly_changed_reply_passes_similar_and_fails_exact_with_a_diff(project: Path, agent: GoldenAgent):
    record(project)
    agent.after_tool = "Your expense EXP-1 is now saved as a draft."
    cases = [dict(CASES[1], id="travel/file ü", golden={"text": "similar"})]
    result, _ = run(project, write_suite(project, cases))
    assert result.exit_code == 0
    score = results(result)["travel/file ü"]["turns"][1]["assertions"][-1]["score"]
    assert 0.8 <= score < 1.0

    junit, html = project / "junit.xml", project / "report.html"
    cases = [dict(CASES[1], golden=True)]
    result, console = run(project, write_suite(project, cases), junit=junit, html=html)
    assert result.exit_code == 1
    row = results(result)["travel/file ü"]
    assert row["status"] == "failed" and row["error"].startswith("turn 2: the reply text differs")
    assertion = row["turns"][1]["assertions"][-1]
    assert assertion["type"] == "golden" and not assertion["passed"]
    assert "-Your expense EXP-1 is saved as a draft." in assertion["diff"]
    assert "+Your expense EXP-1 is now saved as a draft." in assertion["diff"]
    assert row["turns"][0]["assertions"][-1]["passed"]  # turn 1 did not change
    # the console tree shows the diff under turn 2, literally
    assert "✗ golden" in console and "-Your expense EXP-1 is saved as a draft." in console
    assert "+Your expense EXP-1 is now saved as a draft." in console
    failure = ET.parse(junit).getroot().find(".//failure")
    assert failure is not None and "+Your expense EXP-1 is now saved as a draft." in (failure.text or "")
    assert "\n" not in failure.get("message", "")
    page = html.read_text(encoding="utf-8")
    assert '<pre class="diff">' in page and '<span class="ins">+Your expense EXP-1 is now saved as a draft.</span>' in page
    rows = pq.read_table(result.run_dir / "assertions.parquet").to_pylist()
    [failed] = [r for r in rows if r["type"] == "golden" and not r["passed"]]
    assert failed["turn"] == 2 and "+Your expense EXP-1 is now saved as a draft." in failed["diff"]


def test_a_changed_tool_argument_fails_even_with_similar_text(project: Path, agent: GoldenAgent):
    record(project)
    agent.amount = 350
    cases = [dict(CASES[1], golden="similar")]
    result, console = run(project, write_suite(project, cases))
    assert result.exit_code == 1
    assertion = results(result)["travel/file ü"]["turns"][1]["assertions"][-1]
    assert assertion["message"] == "the arguments of tool call 1 (create_expense) differ from the golden ones"
    assert '-create_expense({"amount": 3500, "type": "travel"})' in assertion["diff"]
    assert '+create_expense({"amount": 350, "type": "travel"})' in assertion["diff"]
    assert '+create_expense({"amount": 350, "type": "travel"})' in console


def test_json_replies_compare_as_json(project: Path, agent: GoldenAgent):
    record(project)
    agent.status = '{"items": [1, 2],   "status": "ok"}'  # same JSON, other text
    result, _ = run(project, write_suite(project, [dict(CASES[2], golden=True)]))
    assert result.exit_code == 0
    agent.status = '{"status": "ok", "items": [1, 3]}'
    result, _ = run(project, write_suite(project, [dict(CASES[2], golden=True)]))
    assertion = results(result)["status"]["turns"][0]["assertions"][-1]
    assert assertion["message"] == "the JSON reply differs from the golden one" and '+    3' in assertion["diff"]


def test_a_different_number_of_turns_fails(project: Path, agent: GoldenAgent):
    record(project)
    cases = [dict(CASES[1], turns=[*CASES[1]["turns"], {"input": "thanks"}], golden=True)]
    result, _ = run(project, write_suite(project, cases))
    row = results(result)["travel/file ü"]
    assert row["status"] == "failed"
    assert row["final_assertions"][-1]["message"] == "the conversation has 3 turns, the golden one 2"


def test_a_missing_golden_file_fails_naming_the_file_and_the_command(project: Path, agent: GoldenAgent):
    suite = write_suite(project, [dict(CASES[0], golden=True)])
    result, console = run(project, suite)
    assert result.exit_code == 1
    row = results(result)["greet"]
    expected = project / "golden" / "suite" / "greet.json"
    assert row["status"] == "failed"
    assert row["error"] == f"golden: the golden file {expected} does not exist; write it with: farm test -i {suite} --update-golden {project / 'golden'}"
    assert str(expected) in console


def test_golden_dir_flag_compares_every_case_except_golden_false(project: Path, agent: GoldenAgent):
    golden = record(project)
    agent.reply = "Hi! I can help you file an expense report today."
    cases = [CASES[0], dict(CASES[0], id="off", golden=False)]
    result, _ = run(project, write_suite(project, cases), golden=golden)
    rows = results(result)
    assert rows["greet"]["status"] == "failed"  # exact by default
    assert rows["off"]["status"] == "passed" and all(a["type"] != "golden" for a in rows["off"]["turns"][0]["assertions"])


# -- bad input ---------------------------------------------------------------------------------


def test_an_invalid_golden_value_names_file_line_and_field():
    lines = [
        {"id": "a", "input": "x", "golden": {"text": "fuzzy"}},
        {"id": "b", "input": "x", "golden": 3},
        {"id": "c", "input": "x", "golden": {"txt": "exact"}},
        {"id": "d", "input": "x", "golden": "fuzzy"},
    ]
    suite = load_text("\n".join(json.dumps(c) for c in lines), "suite.jsonl")
    errors = {c.id: (c.source, c.error) for c in suite.cases}
    assert errors["a"] == ("suite.jsonl:1", "field 'golden.text': 'fuzzy' is not one of exact, similar, judge")
    assert errors["b"][1] == "field 'golden': must be true, false, a rule name (exact, similar, judge) or an object {text, threshold, use, enabled}"
    assert errors["c"][1] == "field 'golden.txt': unknown field"
    assert errors["d"] == ("suite.jsonl:4", "field 'golden': \"fuzzy\" is not a rule: the rules are exact, similar, judge")


def test_golden_without_a_folder_is_a_usage_error(tmp_path: Path, agent_server: JSONServer):
    (tmp_path / "farm.toml").write_text(farm_toml(agent_server.url, engine="local"))
    suite = write_suite(tmp_path, [dict(CASES[0], golden=True)])
    with pytest.raises(UsageError, match=r"suite.jsonl:1: field 'golden': .* give --golden DIR or set \[farm\].golden_dir"):
        farm.run(str(suite), config=tmp_path / "farm.toml", quiet=True)


class SameExpenseJudge:
    """A scripted validator: the reply says the same as the golden one when both name the same expense ids."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        self.calls += 1
        system, transcript = body["messages"][0]["content"], body["messages"][-1]["content"]
        golden = re.search(r"Golden reply: (.*?)\nAdditional context", system, re.S)
        said = [line for line in transcript.splitlines() if line.startswith("ASSISTANT:")]
        passed = golden is not None and bool(said) and _expense_ids(golden.group(1)) == _expense_ids(said[-1])
        verdict = {"passed": passed, "score": 1.0 if passed else 0.0, "reason": "same expense" if passed else "another expense"}
        return Response(chat_completion(json.dumps(verdict)))


def _expense_ids(text: str) -> list[str]:
    return sorted(re.findall(r"EXP-\d+", text))


def test_the_judge_rule_asks_the_validator(project: Path, agent: GoldenAgent):
    record(project)
    judge = SameExpenseJudge()
    with JSONServer(judge) as server:
        toml = (project / "farm.toml").read_text()
        toml += f'\n[connectors.judge]\nbase_url = "{server.url}/v1"\nmodel = "judge"\n\n[agents.judge]\nkind = "validator"\nconnector = "judge"\n'
        (project / "farm.toml").write_text(toml)
        cases = [dict(CASES[1], golden={"text": "judge", "use": "agents:judge"})]
        agent.after_tool = "Saved: draft expense EXP-1."
        result, _ = run(project, write_suite(project, cases))
        assert result.exit_code == 0 and judge.calls == 1  # turn 1 is the same text: no verdict needed
        agent.after_tool = "Saved: draft expense EXP-2."
        result, _ = run(project, write_suite(project, cases))
    assertion = results(result)["travel/file ü"]["turns"][1]["assertions"][-1]
    assert not assertion["passed"] and assertion["reason"] == "another expense"
    assert "+Saved: draft expense EXP-2." in assertion["diff"]


def test_a_judge_rule_without_a_validator_is_a_problem_of_the_case(project: Path, agent: GoldenAgent):
    record(project)
    suite = write_suite(project, [dict(CASES[0], golden="judge")])
    with pytest.raises(InputError) as caught:  # the run stops before any call, as farm validate says
        run(project, suite)
    assert caught.value.problems == [f"{suite}:1: field 'golden': the 'judge' rule needs 'use' (a validator agent) or [farm].validator"]


def test_farm_test_update_golden_and_farm_validate_on_the_command_line(project: Path, agent: GoldenAgent):
    suite = write_suite(project, CASES)
    runner = CliRunner()
    out = runner.invoke(app, ["test", "-i", str(suite), "--config", str(project / "farm.toml"), "--update-golden", str(project / "g")])
    assert out.exit_code == 1 and "golden: 3 written, 1 not passed" in out.output
    assert (project / "g" / "suite" / "greet.json").is_file()
    out = runner.invoke(app, ["test", "-i", str(suite), "--config", str(project / "farm.toml"), "--golden", str(project / "g"), "--run", "greet|status"])
    assert out.exit_code == 0, out.output
    bad = write_suite(project, [dict(CASES[0], golden={"text": "fuzzy"})], name="bad.jsonl")
    out = runner.invoke(app, ["validate", str(bad)])
    assert out.exit_code == 2 and f"{bad}:1: field 'golden.text'" in out.output


# -- the comparison itself ---------------------------------------------------------------------


def _turn(number: int, output: str, calls: tuple[tuple[str, Any], ...] = (), awaiting: bool = False) -> TurnResult:
    return TurnResult(turn=number, output=output, awaiting_input=awaiting, tool_calls=[ToolCallRecord(name=n, args=a) for n, a in calls])


def test_compare_reports_each_kind_of_difference_in_its_turn():
    recorded = CaseResult(id="c", status="passed", turns=[_turn(1, "Which type? It matters.", awaiting=True), _turn(2, "Done.", (("create", {"a": 1}),))])
    check = GoldenCheck(rule=GoldenRule(), path="g/s/c.json", conversation=GoldenConversation.from_result(recorded))
    now = CaseResult(id="c", status="passed", turns=[_turn(1, "Which type? It really matters.", awaiting=False), _turn(2, "Done.", (("submit", {"a": 1}),)), _turn(3, "Bye.")])
    found = asyncio.run(compare(check, now, None))
    assert [(where, r.passed) for where, r in found] == [("turn 1", False), ("turn 2", False), ("final assertions", False)]
    first, second, count = (r for _, r in found)
    assert first.message == "the reply text differs from the golden one (exact); awaiting_input is false, the golden one true"
    assert first.diff is not None and "-It matters.\n+It really matters." in first.diff
    assert " Which type?" in first.diff and "-Which type?" not in first.diff  # the unchanged sentence is context
    assert second.message == "the tool calls are [submit], the golden ones [create]"
    assert count.message == "the conversation has 3 turns, the golden one 2" and count.diff is not None and "+turn 3: Bye." in count.diff
    assert now.turns[0].assertions == [first] and now.final_assertions == [count]


def test_an_unreadable_golden_file_makes_the_comparison_an_error(tmp_path: Path):
    suite = load_text(json.dumps({"id": "greet", "input": "Hello", "golden": True}), "suite.jsonl")
    path = golden_path(tmp_path, "greet", "suite.jsonl:1")
    path.parent.mkdir(parents=True)
    for text, problem in (("not json", "is not a golden conversation"), ('{"format": 99, "id": "greet"}', "has format 99, newer than this farm reads (1)")):
        path.write_text(text)
        attach(suite.cases, tmp_path, every=False, input="suite.jsonl")
        check = suite.cases[0].golden
        assert check is not None and check.conversation is None and not check.missing
        assert check.problem is not None and check.problem.startswith(f"the golden file {path} {problem}")
        outcome = asyncio.run(compare(check, CaseResult(id="greet", status="passed"), None))[0][1]
        assert outcome.error and not outcome.passed


def test_a_dynamic_conversation_compares_turn_by_turn(tmp_path: Path):
    """The scripted simulator and the demo agent hold the same conversation twice: it matches its golden."""
    case = {
        "id": "dyn",
        "simulator": {"use": "sim", "goal": "file a $3500 travel expense"},
        "checkpoints": [{"id": "create", "assertion": {"type": "tool_called", "name": "create_expense"}}, {"id": "done", "after": ["create"], "assertion": {"type": "contains", "value": "submitted"}}],
        "max_turns": 6,
    }
    with JSONServer(ScriptedAgent()) as agent_server, JSONServer(RoleModels()) as roles:
        (tmp_path / "farm.toml").write_text(farm_toml(agent_server.url, engine="local") + roles_toml(roles.url))
        suite = write_suite(tmp_path, [case])
        first, _ = run(tmp_path, suite, update_golden=tmp_path / "golden")
        assert first.exit_code == 0
        recorded = json.loads(golden_path(tmp_path / "golden", "dyn", f"{suite}:1").read_text(encoding="utf-8"))
        assert len(recorded["turns"]) >= 2 and recorded["mode"] == "dynamic"
        second, _ = run(tmp_path, suite, golden=tmp_path / "golden")
    row = results(second)["dyn"]
    assert second.exit_code == 0, row["error"]
    compared = [a for turn in row["turns"] for a in turn["assertions"] if a["type"] == "golden"]
    assert len(compared) == len(recorded["turns"]) and all(a["passed"] for a in compared)


def test_rescore_judges_golden_conversations_again_without_calling_the_agent(project: Path, agent_server: JSONServer, agent: GoldenAgent):
    golden = record(project)
    suite = write_suite(project, [dict(CASES[0], golden=True)])
    result, _ = run(project, suite)
    assert results(result)["greet"]["status"] == "passed"
    path = golden / "suite" / f"{safe_name('greet')}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["turns"][0]["reply"] = "Hello! I can help you file an expense report."
    path.write_text(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    before = agent_server.requests
    rescored = farm.rescore(result.run_dir, config=project / "farm.toml", quiet=True)
    assert agent_server.requests == before
    row = results(rescored)["greet"]
    assert row["status"] == "failed" and row["rescorable"] is True
    assert row["turns"][0]["assertions"][-1]["type"] == "golden"
    assert "+I can help you file an expense report today." in row["turns"][0]["assertions"][-1]["diff"]
