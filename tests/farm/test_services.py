"""farm.roles.services: validators, scripts, tool mocks and hooks as a conversation uses them,
with role agents that are real Python agents from a ``farm.toml``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from farm.assertions import Subject
from farm.cases import AssertionSpec
from farm.config import load_config
from farm.roles.services import FarmServices, LocalRoles
from farm.roles.types import HumanRequest, RoleError, RoleRequest

JUDGE = '''
import json

SEEN = []


def judge(messages, options):
    """Answers what the case's metadata tells it to, and records what it was sent."""
    SEEN.append({"messages": messages, "metadata": options["metadata"]})
    return options["metadata"]["answer"]


def simulate(messages, options):
    return json.dumps({"input": "next from " + options["metadata"]["persona"], "goal_achieved": False})
'''

SCRIPT = '''
def verdict(content, input, options):
    return options["metadata"]["verdict"]


def echo(payload):
    return {"echoed": payload}
'''


FARM_TOML = """
[farm]
validator = "judge"

[connectors.llm]
base_url = "http://127.0.0.1:9/v1"

[agents.judge-code]
kind = "python"
entry = "{module}:judge"

[agents.judge]
kind = "validator"
uses = "judge-code"

[agents.sim-code]
kind = "python"
entry = "{module}:simulate"

[agents.sim]
kind = "simulator"
uses = "sim-code"
"""


@pytest.fixture
def project(tmp_path: Path, python_project) -> tuple[Path, str]:
    """A farm.toml with a validator and a simulator played by a Python module beside it."""
    return tmp_path, python_project(JUDGE, FARM_TOML, {"checks.py": SCRIPT})


def services(project: tuple[Path, str]) -> tuple[FarmServices, list[dict[str, Any]]]:
    folder, module = project
    config = load_config(folder / "farm.toml")
    seen = __import__(module).SEEN
    return FarmServices(config, LocalRoles(config)), seen


def agent_spec(answer: Any, **fields: Any) -> AssertionSpec:
    options = {"metadata": {"answer": json.dumps(answer) if not isinstance(answer, str) else answer}}
    return AssertionSpec.model_validate({"type": "agent", "options": options, **fields})


SUBJECT = Subject(content="Your expense is filed.", input="File my expense", metadata={"case_id": "c1"})


def test_a_validators_verdict_becomes_the_outcome(project):
    farm, seen = services(project)
    verdict = {"passed": True, "score": 0.9, "reason": "polite", "suggestions": ["none", 3]}
    outcome = asyncio.run(farm.validate(agent_spec(verdict, value="is polite"), SUBJECT))
    assert (outcome.passed, outcome.score, outcome.reason, outcome.suggestions) == (True, 0.9, "polite", ["none", "3"])
    assert outcome.actual == "Your expense is filed." and outcome.message is None and not outcome.error
    (call,) = seen
    # the user's own validator gets the conversation and the metadata as they are
    assert call["messages"] == [
        {"role": "user", "content": "File my expense"},
        {"role": "assistant", "content": "Your expense is filed."},
    ]
    assert call["metadata"]["criteria"] == "is polite"
    assert call["metadata"]["case_id"] == "c1"
    assert call["metadata"]["test_mode"] == "validator"


@pytest.mark.parametrize(
    ("verdict", "passed", "score"),
    [
        ({"passed": "Yes", "score": 1}, True, 1.0),
        ({"passed": "false", "score": True}, False, None),
        ({"passed": False, "score": "high"}, False, None),
    ],
)
def test_a_validators_verdict_is_read_leniently(project, verdict: dict[str, Any], passed: bool, score: float | None):
    farm, _ = services(project)
    outcome = asyncio.run(farm.validate(agent_spec(verdict, use="agents:judge"), SUBJECT))
    assert (outcome.passed, outcome.score) == (passed, score)
    if not passed:
        assert outcome.message == "the validator judged it failed: no reason given"


@pytest.mark.parametrize("said", ['"nope"', "0", "null"])
def test_a_validators_passed_that_is_neither_true_nor_false_is_its_error(project, said: str):
    farm, _ = services(project)
    outcome = asyncio.run(farm.validate(agent_spec({"passed": json.loads(said)}, use="agents:judge"), SUBJECT))
    assert outcome.error and not outcome.passed
    assert outcome.message == f"validator error: the validator gave no verdict: its 'passed' is {said}, not true or false"


def test_a_validator_that_answers_nothing_usable_is_an_error_after_one_retry(project):
    farm, seen = services(project)
    outcome = asyncio.run(farm.validate(agent_spec("I cannot judge this."), SUBJECT))
    assert outcome.error and not outcome.passed
    assert outcome.message == "validator error: the validator answered no JSON: 'I cannot judge this.'"
    assert len(seen) == 2


def test_a_validator_call_on_another_connector_is_checked_and_not_shown_to_the_agent(project):
    farm, seen = services(project)
    spec = agent_spec({"passed": True}, options={"connector": "llm", "metadata": {"answer": '{"passed": true}'}})
    assert asyncio.run(farm.validate(spec, SUBJECT)).passed
    assert "llm" not in seen[0]["metadata"].values()
    unknown = agent_spec({"passed": True}, options={"connector": "nowhere", "metadata": {"answer": "{}"}})
    outcome = asyncio.run(farm.validate(unknown, SUBJECT))
    assert outcome.error
    assert "connector 'nowhere' is not configured" in (outcome.message or "")


def test_an_agent_assertion_without_a_validator_says_how_to_name_one(project):
    folder, _ = project
    config = load_config(folder / "farm.toml")
    config.farm.validator = None
    outcome = asyncio.run(FarmServices(config, LocalRoles(config)).validate(agent_spec({"passed": True}), SUBJECT))
    assert outcome.error and "needs 'use'" in (outcome.message or "")


def test_an_unknown_role_agent_is_a_role_error(project):
    farm, _ = services(project)
    with pytest.raises(RoleError, match="agent 'ghost' is not configured"):
        asyncio.run(farm.simulate(RoleRequest("ghost", [])))


def test_the_simulator_is_played_by_its_agent_and_its_player_is_built_once(project):
    folder, _ = project
    roles = LocalRoles(load_config(folder / "farm.toml"))
    turn = asyncio.run(roles.simulate(RoleRequest("sim", [], {"persona": "Ann"})))
    assert turn.input == "next from Ann" and turn.goal_achieved is False
    assert roles.player("simulator", "sim") is roles.player("simulator", "sim")
    assert roles.player("simulator", "sim") is not roles.player("simulator", "sim", "llm")


def script_spec(verdict: Any, use: str | None = "scripts:checks.verdict") -> AssertionSpec:
    return AssertionSpec.model_validate({"type": "script", "use": use, "options": {"metadata": {"verdict": verdict}}})


@pytest.mark.parametrize(
    ("verdict", "passed", "message", "score"),
    [
        (True, True, None, None),
        (False, False, "script scripts:checks.verdict returned false", None),
        ({"passed": True, "score": 0.5, "reason": "ok"}, True, None, 0.5),
        ({"pass": False, "message": "too long"}, False, "script scripts:checks.verdict: too long", None),
        ({"passed": False, "score": True}, False, "script scripts:checks.verdict: failed", None),
    ],
)
def test_a_scripts_answer_becomes_the_outcome(project, verdict: Any, passed: bool, message: str | None, score: float | None):
    farm, _ = services(project)
    outcome = asyncio.run(farm.run_script(script_spec(verdict), SUBJECT))
    assert (outcome.passed, outcome.message, outcome.score, outcome.error) == (passed, message, score, False)


def test_a_script_that_answers_something_else_or_cannot_be_found_is_an_error(project):
    farm, _ = services(project)
    wrong = asyncio.run(farm.run_script(script_spec("yes"), SUBJECT))
    assert wrong.error and "returned str, not a bool" in (wrong.message or "")
    missing = asyncio.run(farm.run_script(script_spec(True, use="scripts:checks.absent"), SUBJECT))
    assert missing.error and "has no function 'absent'" in (missing.message or "")
    unnamed = asyncio.run(farm.run_script(script_spec(True, use=None), SUBJECT))
    assert unnamed.error and "needs 'script' or 'use'" in (unnamed.message or "")


def test_tool_mocks_and_hooks_call_scripts(project):
    farm, _ = services(project)
    assert asyncio.run(farm.mock_tool("scripts:checks.echo", {"a": 1})) == {"echoed": {"a": 1}}
    assert asyncio.run(farm.run_hook("scripts:checks.echo", {"b": 2})) == {"echoed": {"b": 2}}


def test_a_person_is_asked_only_when_one_is_there(project):
    farm, _ = services(project)
    request = HumanRequest(case_id="c1", turn=1, question="Confirm?", hint=None)
    assert asyncio.run(farm.ask_human(request)) is None

    async def person(asked: HumanRequest) -> str:
        return f"yes to {asked.question}"

    farm.human = person
    assert asyncio.run(farm.ask_human(request)) == "yes to Confirm?"
