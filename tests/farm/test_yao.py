"""Suites written for Yao's ``yao agent test`` load unchanged and mean what Yao means."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from farm.assertions import Subject, evaluate
from farm.cases import AssertionSpec, Mode, TestCase
from farm.config import FarmConfig
from farm.durations import parse_duration
from farm.results import ToolCallRecord
from farm.roles.services import FarmServices, LocalRoles
from farm.roles.types import RoleRequest, Verdict
from farm.suite.loader import load_file


def check(spec: dict[str, Any], content: str = "", env: Any = None, **subject: Any):
    return asyncio.run(evaluate(AssertionSpec.model_validate(spec), Subject(content=content, **subject), env))


def suite(tmp_path, *cases: dict[str, Any]):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    return load_file(path)


# --- durations, max_turns, shorthands -------------------------------------------


@pytest.mark.parametrize("text, seconds", [("2m30s", 150.0), ("1h30m", 5400.0), ("1m500ms", 60.5), ("30s", 30.0)])
def test_go_durations(text, seconds):
    assert parse_duration(text) == seconds


def test_max_turns_zero_is_the_default():
    case = TestCase.model_validate({"id": "a", "input": "x", "max_turns": 0})
    assert case.max_turns == 20


def test_simulator_shorthands_land_where_the_runner_reads_them():
    case = TestCase.model_validate({
        "id": "a",
        "simulator": {"use": "sim", "goal": "Submit $500", "persona": "new hire", "max_turns": 7, "options": {"metadata": {"tone": "curt"}}},
        "checkpoints": [{"id": "c", "assertion": {"type": "contains", "value": "ok"}}],
    })
    assert case.simulator.options.metadata == {"tone": "curt", "goal": "Submit $500", "persona": "new hire"}
    assert case.max_turns == 7


def test_checkpoints_without_simulator_are_dynamic():
    case = TestCase.model_validate({"id": "a", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "ok"}}]})
    assert case.resolved_mode == Mode.DYNAMIC


def test_value_without_type_is_equals():
    spec = AssertionSpec.model_validate({"value": "OK"})
    assert spec.type == "equals" and check({"value": "OK"}, "OK").passed


def test_expected_beside_assertions_is_ignored_with_a_warning(tmp_path):
    loaded = suite(tmp_path, {"id": "a", "input": "x", "expected": "nope", "assertions": [{"type": "contains", "value": "y"}]}).cases[0]
    assert loaded.ok and loaded.case.expected is None
    assert loaded.warnings and "'expected'" in loaded.warnings[0] and "ignored" in loaded.warnings[0]


# --- assertion spellings ----------------------------------------------------------


def test_script_key_is_the_reference():
    assert AssertionSpec.model_validate({"type": "script", "script": "scripts.test.Validate"}).use == "scripts.test.Validate"


def test_tool_result_value_form_and_the_no_result_form():
    records = [ToolCallRecord(name="create_expense", args={}, result={"status": "submitted", "id": 3})]
    assert check({"type": "tool_result", "value": {"tool": "create_expense", "result": {"status": "submitted"}}}, tool_calls=records).passed
    assert not check({"type": "tool_result", "value": {"tool": "create_expense", "result": {"status": "draft"}}}, tool_calls=records).passed
    assert check({"type": "tool_result", "value": {"tool": "create_expense"}}, tool_calls=records).passed
    failing = [ToolCallRecord(name="create_expense", args={}, result={"error": "over budget"})]
    assert not check({"type": "tool_result", "value": {"tool": "create_expense"}}, tool_calls=failing).passed
    assert not check({"type": "tool_result", "tool": "other"}, tool_calls=records).passed


@pytest.mark.parametrize("called, rule", [("setup", "exact"), ("agents_expense_tools__setup", "suffix"), ("x_setup_y", "substring")])
def test_tool_called_matches_namespaced_tools_and_says_how(called, rule):
    result = check({"type": "tool_called", "value": "setup"}, tool_calls=[ToolCallRecord(name=called, args={})])
    assert result.passed and result.matched_by == rule


def test_tool_called_prefers_exact_over_suffix():
    records = [ToolCallRecord(name="ns__setup", args={}), ToolCallRecord(name="setup", args={})]
    assert check({"type": "tool_called", "value": "setup"}, tool_calls=records).matched_by == "exact"
    assert not check({"type": "tool_called", "value": "teardown"}, tool_calls=records).passed


def test_type_without_path_is_the_whole_reply():
    assert check({"type": "type", "value": "string"}, 'Here you go: {"a": 1}').passed
    assert not check({"type": "type", "value": "object"}, 'Here you go: {"a": 1}').passed
    assert check({"type": "type", "value": "object"}, '{"a": 1}').passed
    assert check({"type": "type", "value": "array"}, '```json\n[1, 2]\n```').passed
    assert check({"type": "type", "value": "string"}, '```json\n[1]\n```\n```json\n[2]\n```').passed


class _Script:
    def __init__(self, answer):
        self.answer = answer

    def resolve(self, ref):
        return lambda content, input, options: self.answer


@pytest.mark.parametrize("answer, passed", [({"pass": True, "message": "ok"}, True), ({"pass": False, "message": "too low"}, False), ({"passed": True}, True), (False, False)])
def test_script_results_in_both_shapes(answer, passed):
    services = FarmServices(FarmConfig(), roles=None, scripts=_Script(answer))
    result = check({"type": "script", "script": "scripts.t.V"}, "reply", env=services)
    assert result.passed is passed and not result.error
    if answer == {"pass": False, "message": "too low"}:
        assert "too low" in result.message


# --- a role call's connector -------------------------------------------------------


class _Roles:
    def __init__(self):
        self.seen: list[RoleRequest] = []

    async def validate(self, request):
        self.seen.append(request)
        return Verdict(passed=True)


def test_agent_assertion_connector_travels_to_the_role_caller():
    roles = _Roles()
    services = FarmServices(FarmConfig(), roles=roles)
    spec = {"type": "agent", "use": "agents:judge", "options": {"connector": "other-llm", "metadata": {"criteria": "polite"}}}
    assert check(spec, "hi", env=services).passed
    assert roles.seen[0].connector == "other-llm" and roles.seen[0].metadata["criteria"] == "polite"
    assert "other-llm" not in roles.seen[0].metadata.values()


def test_local_roles_build_the_player_on_the_named_connector():
    config = FarmConfig.model_validate({
        "connectors": {"a": {"base_url": "http://127.0.0.1:1/v1", "model": "m-a"}, "b": {"base_url": "http://127.0.0.1:1/v1", "model": "m-b"}},
        "agents": {"judge": {"kind": "validator", "connector": "a"}},
    })
    roles = LocalRoles(config)
    assert roles.player("validator", "judge", "b").client.connector.name == "b"
    assert roles.player("validator", "judge").client.connector.name == "a"
