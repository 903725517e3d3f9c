"""``farm validate`` and the load step are deep: every mistake is found before any agent call (SPEC 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from farm.config import load_config
from farm.errors import UsageError
from farm.loader import load_file
from farm.validation import check_for_run, check_suite

TOML = """
[farm]
simulator = "sim"
[connectors.llm]
base_url = "http://127.0.0.1:9/v1"
model = "m"
[agents.bot]
kind = "openai"
connector = "llm"
[agents.sim]
kind = "simulator"
connector = "llm"
[agents.judge]
kind = "validator"
connector = "llm"
"""


def load(tmp_path: Path, case: dict[str, Any], toml: str | None = TOML, **kw):
    path = tmp_path / "s.jsonl"
    path.write_text("\n" + json.dumps(case) + "\n")
    suite = load_file(path)
    if toml is not None:
        (tmp_path / "farm.toml").write_text(toml)
        check_suite(suite, load_config(tmp_path / "farm.toml"), **kw)
    return suite


def problem(tmp_path: Path, case: dict[str, Any], **kw) -> str:
    suite = load(tmp_path, case, **kw)
    assert len(suite.problems) == 1, suite.problems
    text = suite.problems[0]
    assert text.startswith(f"{tmp_path / 's.jsonl'}:2: "), text
    return text


def one(assertion: dict[str, Any]) -> dict[str, Any]:
    return {"id": "a", "input": "x", "assertions": [assertion]}


@pytest.mark.parametrize("assertion, words", [
    ({"type": "regex", "value": "([a-z"}, ["assertions[0]", "invalid regex"]),
    ({"type": "json_path", "path": "$$[[", "value": 1}, ["assertions[0]", "invalid JSONPath"]),
    ({"type": "type", "path": "$.n", "value": "integer"}, ["unknown type name 'integer'", "number"]),
    ({"type": "contains"}, ["'contains' assertion needs a 'value'"]),
    ({"type": "equals"}, ["needs a 'value'"]),
    ({"type": "tool_called"}, ["needs a 'name'"]),
    ({"type": "tool_result", "value": {"result": {}}}, ["needs a 'tool'"]),
    ({"type": "tool_result", "tool": "t", "result": {"s": "regex:(("}}, ["invalid regex"]),
    ({"type": "latency", "value": "fast"}, ["numeric 'value'"]),
    ({"type": "contains", "valeu": "x"}, ["'assertions[0].valeu': unknown field", "did you mean 'value'"]),
    ({"type": "agent", "use": "agents:judge", "options": {"conector": "llm"}}, ["assertions[0].options.conector", "did you mean 'connector'"]),
])
def test_assertion_mistakes_name_file_line_and_field(tmp_path, assertion, words):
    text = problem(tmp_path, one(assertion))
    for word in words:
        assert word in text


@pytest.mark.parametrize("case, words", [
    ({"id": "a", "input": "x", "tagz": ["t"]}, ["'tagz'", "did you mean 'tags'"]),
    ({"id": "a", "turns": [{"input": "x", "asserts": []}]}, ["'turns[0].asserts'", "did you mean 'assert'"]),
    ({"id": "a", "simulator": {"use": "sim", "metadata": {"x": 1}}, "checkpoints": [{"id": "c", "assert": "contains"}]}, ["'simulator.metadata'", "unknown field"]),
    ({"id": "a", "checkpoints": [{"id": "c", "assertion": {"type": "contains", "value": "ok"}, "afterr": ["c"]}]}, ["'checkpoints[0].afterr'", "did you mean 'after'"]),
    ({"id": "a", "input": "x", "options": {"metadata": {}, "conector": "llm"}}, ["'options.conector'"]),
    ({"id": "a", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}, "after": ["c"]}]}, ["depends on itself"]),
    ({"id": "a", "checkpoints": [
        {"id": "c", "assert": {"type": "contains", "value": "x"}, "after": ["d"]},
        {"id": "d", "assert": {"type": "contains", "value": "y"}, "after": ["c"]},
    ]}, ["cycle", "c -> d -> c"]),
    (
        {"id": "a", "simulator": {"use": "simm"}, "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]},
        ["'simulator.use'", "agent 'simm' is not configured", "did you mean 'sim'"],
    ),
    ({"id": "a", "input": "x", "assertions": [{"type": "agent", "use": "agents:judgee", "value": "polite"}]}, ["assertions[0].use", "'judgee'"]),
    ({"id": "a", "input": "x", "options": {"connector": "lm"}}, ["options.connector", "connector 'lm' is not configured"]),
    ({"id": "a", "input": "x", "attachments": ["file://../../etc/passwd"]}, ["'input'", "outside the test file's folder"]),
    ({"id": "a", "input": "x", "attachments": ["file://missing.png"]}, ["does not exist"]),
    ({"id": "a", "input": "x", "assertions": [{"type": "script", "script": "scripts.nope.Check"}]}, ["assertions[0].script", "exists"]),
    ({"id": "a", "input": "x", "before": "scripts:../escape"}, ["'before'", "not a dotted module path"]),
])
def test_case_mistakes_name_file_line_and_field(tmp_path, case, words):
    text = problem(tmp_path, case)
    for word in words:
        assert word in text, text


def test_checkpoints_without_any_simulator_name_both_remedies(tmp_path):
    toml = TOML.replace('simulator = "sim"', "")
    case = {"id": "a", "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}
    text = problem(tmp_path, case, toml=toml)
    assert "'simulator.use'" in text and "--simulator" in text and "[farm].simulator" in text
    assert not load(tmp_path, case, toml=toml, default_simulator="sim").problems


def test_a_script_reference_that_resolves_is_fine(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "checks.py").write_text("def Validate(content, input, options):\n    return {'pass': True}\n")
    assert not load(tmp_path, one({"type": "script", "script": "scripts.checks.Validate"})).problems


def test_without_a_config_ids_are_not_checked(tmp_path):
    case = {"id": "a", "simulator": {"use": "whoever"}, "checkpoints": [{"id": "c", "assert": {"type": "contains", "value": "x"}}]}
    suite = load(tmp_path, case, toml=None)
    from farm.config import FarmConfig

    check_suite(suite, FarmConfig())
    assert not suite.problems


def test_run_checks_refuse_an_unimportable_python_entry_and_a_missing_key(tmp_path, monkeypatch):
    toml = TOML + '[agents.py]\nkind = "python"\nentry = "no_such_module_here:answer"\n'
    suite = load(tmp_path, {"id": "a", "input": "x"}, toml=toml)
    config = load_config(tmp_path / "farm.toml")
    with pytest.raises(UsageError, match=r'agents\."py"\.entry: module .no_such_module_here. cannot be imported'):
        check_for_run(suite, config, "py")
    keyed = load_config(tmp_path / "farm.toml").model_copy()
    keyed.connectors["llm"].api_key_env = "FARM_UNSET_KEY_FOR_TEST"
    monkeypatch.delenv("FARM_UNSET_KEY_FOR_TEST", raising=False)
    with pytest.raises(UsageError, match=r"FARM_UNSET_KEY_FOR_TEST, which is not set"):
        check_for_run(suite, keyed, "bot")
    check_for_run(suite, keyed, "bot", dry_run=True)  # a dry run calls nothing
    monkeypatch.setenv("FARM_UNSET_KEY_FOR_TEST", "k")
    check_for_run(suite, keyed, "bot")
