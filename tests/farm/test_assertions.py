"""The built-in assertion types (docs/reference/assertions.md), run through ``evaluate`` as the runner does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from farm.assertions import Outcome, Subject, describe, evaluate, known_types
from farm.assertions.builtin import json_equal, partial_match
from farm.cases import AssertionSpec
from farm.results import ACTUAL_LIMIT, AssertionResult, ToolCallRecord

BUILTIN_TYPES = {
    "contains",
    "not_contains",
    "equals",
    "regex",
    "json_path",
    "type",
    "tool_called",
    "tool_result",
    "agent",
    "script",
    "latency",
}


def check(spec: dict[str, Any], content: str = "", env: Any = None, **subject: Any) -> AssertionResult:
    """Evaluate the assertion written as ``spec`` against a reply ``content``."""
    parsed = AssertionSpec.model_validate(spec)
    return asyncio.run(evaluate(parsed, Subject(content=content, **subject), env))


def calls(*records: tuple[str, Any] | tuple[str, Any, Any]) -> list[ToolCallRecord]:
    """Tool call records from (name, args[, result]) tuples."""
    return [ToolCallRecord(name=r[0], args=r[1], result=r[2] if len(r) > 2 else None) for r in records]


# --- registry ------------------------------------------------------------


def test_known_types_lists_every_builtin_type():
    assert BUILTIN_TYPES <= known_types()


def test_unknown_type_is_an_error_listing_the_known_ones():
    result = check({"type": "smells_nice", "value": "x"}, "anything")
    assert not result.passed and result.error
    assert "unknown assertion type 'smells_nice'" in result.message
    assert "contains" in result.message


def test_unknown_type_stays_an_error_when_negated():
    result = check({"type": "smells_nice", "negate": True}, "anything")
    assert not result.passed and result.error


def test_exception_in_a_checker_is_an_error_result():
    # an invalid pattern inside a tool_result raises InvalidPattern deep in the match
    spec = {"type": "tool_result", "tool": "t", "result": {"id": "regex:("}}
    result = check(spec, tool_calls=calls(("t", {}, {"id": "x"})))
    assert not result.passed and result.error
    assert result.message.startswith("tool_result: InvalidPattern: missing )")


def test_long_actual_is_truncated():
    result = check({"type": "contains", "value": "needle"}, "x" * 5000)
    assert not result.passed
    assert isinstance(result.actual, str)
    assert len(result.actual) < ACTUAL_LIMIT + 40
    assert result.actual.endswith("(5000 chars)")


def test_result_records_type_expected_and_negate():
    result = check({"type": "regex", "pattern": r"\d+", "negate": True}, "no digits")
    assert (result.type, result.expected, result.negate, result.passed) == ("regex", r"\d+", True, True)


# --- negate and message -------------------------------------------------


def test_negate_turns_a_pass_into_a_failure_with_its_own_message():
    result = check({"type": "contains", "value": "error", "negate": True}, "an error occurred")
    assert not result.passed
    assert result.message == "expected NOT contains 'error', but it held"


def test_negate_turns_a_failure_into_a_pass():
    result = check({"type": "contains", "value": "error", "negate": True}, "all good")
    assert result.passed and result.message is None


def test_custom_message_replaces_the_failure_text():
    result = check({"type": "contains", "value": "ok", "message": "should confirm"}, "nope")
    assert not result.passed and result.message == "should confirm"


def test_custom_message_is_not_shown_on_a_pass():
    result = check({"type": "contains", "value": "ok", "message": "should confirm"}, "ok!")
    assert result.passed and result.message is None


# --- contains / not_contains -------------------------------------------


def test_contains_passes_and_fails():
    assert check({"type": "contains", "value": "submitted"}, "Expense submitted.").passed
    result = check({"type": "contains", "value": "submitted"}, "Expense drafted.")
    assert not result.passed
    assert result.message == "expected the reply to contain 'submitted'"
    assert result.actual == "Expense drafted."


def test_contains_is_case_sensitive_unless_ignore_case():
    assert not check({"type": "contains", "value": "SUBMITTED"}, "submitted").passed
    assert check({"type": "contains", "value": "SUBMITTED", "ignore_case": True}, "submitted").passed


def test_contains_a_list_needs_all_of_them():
    spec = {"type": "contains", "value": ["amount", "receipt"]}
    assert check(spec, "amount and receipt please").passed
    result = check(spec, "amount please")
    assert not result.passed and result.message == "expected the reply to contain 'receipt'"


@pytest.mark.parametrize("kind", ["contains", "not_contains"])
@pytest.mark.parametrize("value", ["", [], ["amount", ""]])
def test_an_empty_text_to_look_for_is_an_error_not_a_verdict_even_negated(kind, value):
    """Every reply holds "": met by a case a script builds at run time, it neither passes nor fails."""
    for negate in (False, True):
        result = check({"type": kind, "value": value, "negate": negate}, "amount please")
        assert result.error and not result.passed
        assert result.message == f"a '{kind}' assertion needs a 'value' that is not empty (an empty one matches every reply)"


def test_contains_looks_at_tool_result_texts():
    result = check({"type": "contains", "value": "EXP-42"}, "done", tool_texts=['{"id": "EXP-42"}'])
    assert result.passed


def test_contains_without_value_is_an_error():
    result = check({"type": "contains"}, "text")
    assert not result.passed and result.error


def test_contains_and_not_contains_without_value_say_what_the_value_is_for():
    assert check({"type": "contains"}, "text").message == "a 'contains' assertion needs a 'value' (the text to find)"
    result = check({"type": "not_contains"}, "text")
    assert result.error and result.message == "a 'not_contains' assertion needs a 'value' (the text that must be absent)"


def test_not_contains_passes_when_absent_and_fails_when_present():
    assert check({"type": "not_contains", "value": "error"}, "all good").passed
    result = check({"type": "not_contains", "value": "error"}, "an error")
    assert not result.passed and result.message == "expected the reply not to contain 'error'"


def test_not_contains_ignore_case_and_list():
    spec = {"type": "not_contains", "value": ["Error", "fail"], "ignore_case": True}
    assert check(spec, "all good").passed
    assert not check(spec, "ERROR!").passed


# --- equals ------------------------------------------------------------


def test_equals_exact_string_ignoring_surrounding_whitespace():
    assert check({"type": "equals", "value": "OK"}, "  OK\n").passed
    result = check({"type": "equals", "value": "OK"}, "OK!")
    assert not result.passed and result.message == "expected the reply to equal 'OK'"


def test_equals_is_case_sensitive():
    assert not check({"type": "equals", "value": "OK"}, "ok").passed


def test_equals_json_equal_when_both_sides_are_json():
    assert check({"type": "equals", "value": '{"a": 1, "b": [1, 2]}'}, '{"b":[1,2],"a":1.0}').passed
    assert not check({"type": "equals", "value": '{"a": 1}'}, '{"a": 2}').passed


def test_equals_non_string_value_against_json_in_a_fence():
    content = 'Here you go:\n```json\n{"status": "ok", "n": 3}\n```'
    assert check({"type": "equals", "value": {"status": "ok", "n": 3}}, content).passed
    assert not check({"type": "equals", "value": {"status": "ok"}}, content).passed


def test_equals_true_is_not_one():
    assert not check({"type": "equals", "value": 1}, "true").passed
    assert check({"type": "equals", "value": True}, "true").passed


# --- regex ---------------------------------------------------------------


def test_regex_pattern_and_value_spellings():
    assert check({"type": "regex", "pattern": r"order-\d+"}, "created order-123").passed
    assert check({"type": "regex", "value": r"order-\d+"}, "created order-123").passed
    result = check({"type": "regex", "value": r"order-\d+"}, "no order")
    assert not result.passed and result.message == r"expected the reply to match /order-\d+/"


def test_regex_value_alias_is_normalised_to_pattern():
    spec = AssertionSpec.model_validate({"type": "regex", "value": "abc"})
    assert spec.pattern == "abc"


def test_regex_case_insensitive_by_flag_or_option():
    assert not check({"type": "regex", "pattern": "hello"}, "HELLO").passed
    assert check({"type": "regex", "pattern": "(?i)hello"}, "HELLO").passed
    assert check({"type": "regex", "pattern": "hello", "ignore_case": True}, "HELLO").passed


def test_regex_invalid_pattern_is_an_error():
    result = check({"type": "regex", "pattern": "order-(\\d+"}, "order-1")
    assert not result.passed and result.error
    assert result.message.startswith("invalid regex 'order-(\\\\d+'")


# --- json_path ------------------------------------------------------------


def test_json_path_passes_on_json_equality():
    content = '{"status": "ok", "count": 3}'
    assert check({"type": "json_path", "path": "$.status", "value": "ok"}, content).passed
    assert check({"type": "json_path", "path": "$.count", "value": 3.0}, content).passed
    result = check({"type": "json_path", "path": "$.status", "value": "done"}, content)
    assert not result.passed
    assert result.actual == "ok"
    assert result.message == "expected $.status to be 'done', found 'ok'"


def test_json_path_reads_json_in_fences_and_prose():
    fenced = 'Result:\n```json\n{"status": "ok"}\n```\nThanks.'
    prose = 'The expense is {"status": "ok"} as requested.'
    for content in (fenced, prose):
        assert check({"type": "json_path", "path": "$.status", "value": "ok"}, content).passed


def test_json_path_array_value_means_any_of():
    spec = {"type": "json_path", "path": "$.status", "value": ["ok", "done"]}
    assert check(spec, '{"status": "done"}').passed
    result = check(spec, '{"status": "failed"}')
    assert not result.passed and "one of" in result.message


def test_json_path_array_value_equal_to_the_matched_array_passes():
    spec = {"type": "json_path", "path": "$.tags", "value": ["a", "b"]}
    assert check(spec, '{"tags": ["a", "b"]}').passed


def test_json_path_without_value_passes_when_the_path_matches():
    assert check({"type": "json_path", "path": "$.id"}, '{"id": null}').passed
    assert not check({"type": "json_path", "path": "$.id"}, '{"other": 1}').passed


def test_json_path_explicit_null_value_is_compared():
    spec = {"type": "json_path", "path": "$.id", "value": None}
    assert check(spec, '{"id": null}').passed
    assert not check(spec, '{"id": 7}').passed


def test_json_path_filters_work():
    content = '{"items": [{"name": "a", "price": 1}, {"name": "b", "price": 5}]}'
    spec = {"type": "json_path", "path": "$.items[?(@.price > 2)].name", "value": "b"}
    assert check(spec, content).passed


def test_json_path_no_json_in_reply():
    result = check({"type": "json_path", "path": "$.status", "value": "ok"}, "just words")
    assert not result.passed and not result.error
    assert result.message == "the reply holds no JSON"


def test_json_path_matching_nothing():
    result = check({"type": "json_path", "path": "$.x", "value": 1}, '{"y": 1}')
    assert not result.passed and result.message == "path $.x matched nothing"


def test_json_path_uses_the_given_document_for_final_assertions():
    document = {"expense": {"status": "submitted"}}
    spec = {"type": "json_path", "path": "$.expense.status", "value": "submitted"}
    assert check(spec, "", document=document).passed


def test_json_path_invalid_path_is_an_error():
    result = check({"type": "json_path", "path": "$.[", "value": 1}, '{"a": 1}')
    assert not result.passed and result.error
    assert "'$.[' is not a JSONPath (it ends too soon)" in result.message


# --- type ------------------------------------------------------------------


def test_type_at_path():
    content = '{"count": 3, "ratio": 0.5, "flag": true, "tags": [], "meta": {}, "none": null, "s": "x"}'
    for path, name in [
        ("$.count", "number"),
        ("$.ratio", "number"),
        ("$.flag", "boolean"),
        ("$.tags", "array"),
        ("$.meta", "object"),
        ("$.none", "null"),
        ("$.s", "string"),
    ]:
        assert check({"type": "type", "path": path, "value": name}, content).passed, path
    result = check({"type": "type", "path": "$.s", "value": "number"}, content)
    assert not result.passed
    assert result.actual == "string"
    assert result.message == "expected $.s to be of type number, found string 'x'"


def test_type_boolean_is_not_a_number():
    assert not check({"type": "type", "path": "$.flag", "value": "number"}, '{"flag": true}').passed


def test_type_integer_is_not_a_type_name_as_in_yao():
    result = check({"type": "type", "path": "$.n", "value": "integer"}, '{"n": 3}')
    assert not result.passed and result.error


def test_type_of_the_whole_reply():
    assert check({"type": "type", "value": "object"}, '```json\n{"a": 1}\n```').passed
    assert check({"type": "type", "value": "string"}, "plain words").passed
    assert not check({"type": "type", "value": "object"}, "plain words").passed


def test_type_path_matching_nothing_and_unknown_type_name():
    assert check({"type": "type", "path": "$.x", "value": "number"}, '{"y": 1}').message == (
        "path $.x matched nothing"
    )
    result = check({"type": "type", "path": "$.y", "value": "float"}, '{"y": 1}')
    assert not result.passed and result.error


# --- tool_called ------------------------------------------------------------


def test_tool_called_by_name_and_value_alias():
    made = calls(("get_policy", {}), ("create_expense", {"amount": 5}))
    assert check({"type": "tool_called", "name": "create_expense"}, tool_calls=made).passed
    assert check({"type": "tool_called", "value": "create_expense"}, tool_calls=made).passed


def test_tool_called_value_alias_is_normalised_to_name():
    spec = AssertionSpec.model_validate({"type": "tool_called", "value": "x"})
    assert spec.name == "x"


def test_tool_called_failure_names_what_was_called():
    result = check({"type": "tool_called", "name": "create_expense"}, tool_calls=calls(("get_policy", {})))
    assert not result.passed
    assert result.message == "tool 'create_expense' was not called (called: get_policy)"
    assert result.actual == ["get_policy"]


def test_tool_called_with_no_calls():
    result = check({"type": "tool_called", "name": "create_expense"})
    assert not result.passed
    assert result.message == "tool 'create_expense' was not called (no tool was called)"


def test_tool_called_list_means_any_of():
    spec = {"type": "tool_called", "name": ["create_expense", "submit_expense"]}
    assert check(spec, tool_calls=calls(("submit_expense", {}))).passed
    result = check(spec, tool_calls=calls(("get_policy", {})))
    assert not result.passed and result.message.startswith("none of the tools")


def test_tool_called_arguments_are_a_subset_match():
    made = calls(("create_expense", {"amount": 500, "currency": "USD", "meta": {"a": 1, "b": 2}}))
    spec = {"type": "tool_called", "name": {"name": "create_expense", "arguments": {"amount": 500}}}
    assert check(spec, tool_calls=made).passed
    nested = {"type": "tool_called", "value": {"name": "create_expense", "arguments": {"meta": {"b": 2}}}}
    assert check(nested, tool_calls=made).passed
    wrong = {"type": "tool_called", "name": {"name": "create_expense", "arguments": {"amount": 50}}}
    result = check(wrong, tool_calls=made)
    assert not result.passed
    assert "with arguments" in result.message


def test_tool_called_missing_argument_fails():
    made = calls(("create_expense", {"amount": 500}))
    spec = {"type": "tool_called", "name": {"name": "create_expense", "arguments": {"currency": "USD"}}}
    assert not check(spec, tool_calls=made).passed


def test_tool_called_list_of_objects():
    made = calls(("create_expense", {"amount": 500}))
    spec = {
        "type": "tool_called",
        "name": [
            {"name": "create_expense", "arguments": {"amount": 1}},
            {"name": "create_expense", "arguments": {"amount": 500}},
        ],
    }
    assert check(spec, tool_calls=made).passed


def test_tool_called_arguments_against_unparsed_args_fail():
    made = calls(("create_expense", "not json"))
    spec = {"type": "tool_called", "name": {"name": "create_expense", "arguments": {"amount": 1}}}
    assert not check(spec, tool_calls=made).passed


# --- tool_result ------------------------------------------------------------


def test_tool_result_partial_object_match():
    made = calls(("create_expense", {}, {"status": "submitted", "id": "EXP-1", "meta": {"by": "bot"}}))
    spec = {"type": "tool_result", "tool": "create_expense", "result": {"status": "submitted"}}
    assert check(spec, tool_calls=made).passed
    spec["result"] = {"status": "draft"}
    result = check(spec, tool_calls=made)
    assert not result.passed
    assert result.actual["status"] == "submitted"
    assert "does not match" in result.message


def test_tool_result_regex_prefix():
    made = calls(("create_expense", {}, {"id": "EXP-1234", "total": 500}))
    spec = {"type": "tool_result", "tool": "create_expense", "result": {"id": r"regex:^EXP-\d+$"}}
    assert check(spec, tool_calls=made).passed
    spec["result"] = {"total": "regex:^5\\d\\d$"}  # numbers are searched as their JSON text
    assert check(spec, tool_calls=made).passed
    spec["result"] = {"id": r"regex:^INV-"}
    assert not check(spec, tool_calls=made).passed


def test_tool_result_any_call_may_match():
    made = calls(("lookup", {}, {"found": False}), ("lookup", {}, {"found": True}))
    assert check({"type": "tool_result", "tool": "lookup", "result": {"found": True}}, tool_calls=made).passed


def test_tool_result_of_a_tool_not_called():
    result = check({"type": "tool_result", "tool": "lookup", "result": {}}, tool_calls=calls(("other", {})))
    assert not result.passed
    assert result.message == "tool 'lookup' was not called (called: other)"


def test_tool_result_reads_json_given_as_text():
    made = calls(("lookup", {}, '{"found": true, "n": 2}'))
    assert check({"type": "tool_result", "tool": "lookup", "result": {"found": True}}, tool_calls=made).passed


def test_tool_result_without_tool_is_an_error():
    result = check({"type": "tool_result", "result": {}})
    assert not result.passed and result.error


# --- latency --------------------------------------------------------------


def test_latency():
    assert check({"type": "latency", "value": 1000}, latency_ms=1000.0).passed  # at the limit is fine
    result = check({"type": "latency", "value": 1000}, latency_ms=1500.0)
    assert not result.passed
    assert result.actual == 1500.0
    assert result.message == "the turn took 1500 ms, more than 1000 ms"


def test_latency_needs_a_number():
    assert check({"type": "latency", "value": "fast"}).error


# --- agent and script -----------------------------------------------------


class FakeEnv:
    """Answers validators and scripts with fixed outcomes, recording what it saw."""

    def __init__(self, outcome: Outcome | Exception) -> None:
        self.outcome = outcome
        self.seen: list[tuple[str, str]] = []

    async def validate(self, spec: AssertionSpec, subject: Subject) -> Outcome:
        return self._answer("validate", subject)

    async def run_script(self, spec: AssertionSpec, subject: Subject) -> Outcome:
        return self._answer("script", subject)

    def _answer(self, kind: str, subject: Subject) -> Outcome:
        self.seen.append((kind, subject.content))
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


def test_agent_without_a_validator_is_an_error():
    result = check({"type": "agent", "use": "validator"}, "reply")
    assert not result.passed and result.error
    assert result.message == "agent assertions need a validator (none is available in this run)"


def test_script_without_a_runner_is_an_error():
    result = check({"type": "script", "use": "scripts:check"}, "reply")
    assert not result.passed and result.error
    assert "script" in result.message


def test_agent_and_script_pass_on_through_the_env():
    env = FakeEnv(Outcome(True, score=0.9, reason="helpful", suggestions=["be brief"]))
    result = check({"type": "agent", "use": "validator"}, "reply", env=env)
    assert result.passed and result.score == 0.9 and result.reason == "helpful"
    assert result.suggestions == ["be brief"]
    assert check({"type": "script", "use": "scripts:check"}, "other", env=env).passed
    assert env.seen == [("validate", "reply"), ("script", "other")]


def test_agent_failure_and_env_exception():
    failing = FakeEnv(Outcome(False, message="too rude"))
    result = check({"type": "agent"}, "reply", env=failing)
    assert not result.passed and not result.error and result.message == "too rude"
    broken = FakeEnv(RuntimeError("validator down"))
    result = check({"type": "agent"}, "reply", env=broken)
    assert not result.passed and result.error
    assert result.message == "agent: RuntimeError: validator down"


# --- describe -------------------------------------------------------------


def test_each_type_describes_what_it_checks():
    assert describe("json_path", {"path": "$.a.b", "value": "y"}) == '$.a.b = "y"'
    assert describe("type", {"path": "$.n", "value": "number"}) == 'type $.n is "number"'
    assert describe("tool_called", {"name": "book", "arguments": {"n": 2}}) == "tool_called book({n: 2})"
    assert describe("tool_called", {"name": "book"}) == "tool_called book()"
    assert describe("tool_result", {"tool": "book", "result": {"ok": True}}) == 'tool_result book → {"ok": true}'
    assert describe("latency", 500) == "latency ≤ 500ms"


def test_types_without_a_describer_read_as_name_and_expected_json():
    assert describe("contains", "héllo") == 'contains "héllo"'
    assert describe("equals", {"a": 1}) == 'equals {"a": 1}'
    assert describe("agent", None) == "agent"
    assert describe("latency", None) == "latency"
    # A describer that does not recognise the value falls back to the plain form.
    assert describe("json_path", "$.a") == 'json_path "$.a"'
    assert describe("no_such_type", [1]) == "no_such_type [1]"


# --- helpers --------------------------------------------------------------


def test_json_equal_distinguishes_booleans_from_numbers():
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1)
    assert not json_equal([0], [False])
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})


def test_partial_match_is_recursive_for_objects_only_without_patterns():
    assert partial_match({"a": {"b": 1}}, {"a": {"b": 1, "c": 2}, "d": 3})
    assert not partial_match({"a": [{"b": 1}]}, {"a": [{"b": 1, "c": 2}]})
    assert partial_match({"a": [{"b": 1}]}, {"a": [{"b": 1, "c": 2}]}, patterns=True)
    assert not partial_match({"a": "regex:x"}, {"a": "x"})
