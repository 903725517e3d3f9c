"""The conversation runner's logic, in process: a scripted agent and scripted role services."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from farm.agents.base import Reply, ToolCall
from farm.conversation.runner import RunSettings, run_case
from farm.roles.types import RoleError, SimulatorTurn
from farm.suite.loader import parse_cases


class Agent:
    """Answers each user message by the first rule whose key it contains."""

    def __init__(self, rules: dict[str, Any], default: str = "ok."):
        self.rules = rules
        self.default = default
        self.calls = 0

    async def send(self, messages, options):
        self.calls += 1
        last = messages[-1]
        if last["role"] == "tool":
            return Reply(content=f"tool said {last['content']}.")
        text = last["content"]
        for key, answer in self.rules.items():
            if key in text:
                if isinstance(answer, Reply):
                    return answer
                if isinstance(answer, float):
                    await asyncio.sleep(answer)
                    return Reply(content="late.")
                return Reply(content=answer)
        return Reply(content=self.default)

    async def aclose(self):
        pass


class Services:
    assertion_env = None

    def __init__(self, inputs: list[Any] | Exception):
        self.inputs = inputs
        self.seen: list[dict] = []

    async def simulate(self, request):
        self.seen.append(request.metadata)
        if isinstance(self.inputs, Exception):
            raise self.inputs
        if not self.inputs:
            return SimulatorTurn(input="and then?")
        item = self.inputs.pop(0)
        return item if isinstance(item, SimulatorTurn) else SimulatorTurn(input=item)

    async def ask_human(self, request):
        return None

    async def mock_tool(self, mock, arguments):
        return {"scripted": arguments}


def run(case: dict, agent: Agent, services: Services | None = None, **settings):
    (loaded,) = parse_cases([("t.jsonl:1", case)])
    return asyncio.run(run_case(loaded, agent, services, RunSettings(**settings)))


DYNAMIC = {
    "id": "d",
    "simulator": {"use": "sim"},
    "checkpoints": [
        {"id": "ask", "assertion": {"type": "contains", "value": "which type"}},
        {"id": "done", "after": ["ask"], "assertion": {"type": "contains", "value": "submitted"}},
    ],
    "max_turns": 5,
}
AGENT = {"expense": "which type?", "travel": "submitted.", "hello": "hi, what can I do?"}


def test_dynamic_passes_when_required_checkpoints_are_reached():
    r = run(DYNAMIC, Agent(AGENT), Services(["expense please", "travel"]))
    assert r.status == "passed", r.error
    assert [(c.id, c.reached_at_turn) for c in r.checkpoints] == [("ask", 1), ("done", 2)]
    assert [t.input_source for t in r.turns] == ["simulated", "simulated"]


def test_a_simulator_named_with_the_agents_prefix_is_that_agent():
    services = Services(["expense please", "travel"])
    seen: list[str] = []
    simulate = services.simulate

    async def recording(request):
        seen.append(request.agent_id)
        return await simulate(request)

    services.simulate = recording  # type: ignore[method-assign]
    r = run({**DYNAMIC, "simulator": {"use": "agents:sim"}}, Agent(AGENT), services)
    assert r.status == "passed", r.error
    assert seen == ["sim", "sim"]


def test_dynamic_case_input_is_the_first_turn():
    r = run({**DYNAMIC, "input": "expense please"}, Agent(AGENT), Services(["travel"]))
    assert r.status == "passed"
    assert [t.input_source for t in r.turns] == ["static", "simulated"]


def test_dynamic_fails_when_the_agent_completes_with_checkpoints_missing():
    r = run(DYNAMIC, Agent({"expense": "I filed nothing."}), Services(["expense please"]))
    assert r.status == "failed"
    assert "completed" in r.error and "ask, done" in r.error


def test_dynamic_fails_when_the_simulator_says_goal_achieved():
    r = run(DYNAMIC, Agent(AGENT), Services(["expense please", SimulatorTurn(goal_achieved=True)]))
    assert r.status == "failed"
    assert "goal is achieved" in r.error and "done" in r.error


def test_dynamic_fails_at_max_turns():
    r = run({**DYNAMIC, "max_turns": 2}, Agent({"": "what else?"}), Services([]))
    assert r.status == "failed"
    assert "max turns (2)" in r.error
    assert r.total_turns == 2


def test_dynamic_timeout():
    r = run({**DYNAMIC, "timeout": "0.3s"}, Agent({"slow": 2.0}), Services(["slow"]))
    assert r.status == "timeout"


def test_a_simulator_error_is_an_error_of_the_simulator_not_a_skip():
    r = run(DYNAMIC, Agent(AGENT), Services(RoleError("no JSON in the answer")))
    assert (r.status, r.error_role) == ("error", "simulator")
    assert "simulator error" in r.error and "no JSON" in r.error
    assert not r.status.ok  # a dead simulator does not let the run exit 0


def test_a_simulator_that_answers_no_input_is_an_error_of_the_simulator():
    r = run(DYNAMIC, Agent(AGENT), Services([SimulatorTurn(input="")]))
    assert (r.status, r.error_role, r.error) == ("error", "simulator", "simulator error: it answered no input")


class Judge:
    """A validator service that fails (``down``) or judges by whether the reply holds ``word``."""

    def __init__(self, word: str = "", down: bool = False):
        self.word, self.down = word, down
        self.judged: list[str] = []

    async def validate(self, spec, subject):
        from farm.assertions import Outcome
        from farm.roles.types import VALIDATOR_ERROR

        self.judged.append(subject.content)
        if self.down:
            return Outcome(False, message=f"{VALIDATOR_ERROR}: the validator agent failed: connection refused", error=True)
        return Outcome(self.word in subject.content)

    async def run_script(self, spec, subject):  # pragma: no cover - not used
        raise AssertionError


class JudgedServices(Services):
    def __init__(self, inputs: list[Any], judge: Judge):
        super().__init__(inputs)
        self.assertion_env = judge  # type: ignore[assignment]


JUDGED = {
    "id": "j",
    "simulator": {"use": "sim"},
    "checkpoints": [
        {"id": "size", "assertion": {"type": "contains", "value": "which size"}},
        {"id": "confirm", "after": ["size"], "assertion": {"type": "agent", "use": "agents:judge", "value": "asks to confirm"}},
    ],
    "max_turns": 3,
}


def test_a_checkpoint_whose_after_is_not_reached_is_not_judged():
    judge = Judge(down=True)
    r = run(JUDGED, Agent({"hello": "what would you like?"}), JudgedServices(["hello", "hello", "hello"], judge))
    assert judge.judged == []  # 'size' never reached: no judge call for 'confirm', and no judge error
    assert r.status == "failed" and "max turns (3)" in r.error and "size, confirm" in r.error


def test_a_judge_that_fails_makes_the_case_an_error_of_the_validator():
    judge = Judge(down=True)
    r = run(JUDGED, Agent({"shirt": "which size?"}), JudgedServices(["a shirt"], judge))
    assert judge.judged == ["which size?"]  # 'size' reached in turn 1 frees 'confirm' in the same turn
    assert (r.status, r.error_role) == ("error", "validator")
    assert r.error.startswith("checkpoint 'confirm': validator error")


def test_a_failing_judge_of_a_turn_assertion_is_an_error_of_the_validator():
    case = {"id": "t", "input": "hi", "assertions": [{"type": "agent", "use": "agents:judge", "value": "is polite"}]}
    r = run(case, Agent({}), JudgedServices([], Judge(down=True)))
    assert (r.status, r.error_role) == ("error", "validator")
    assert run({**case, "assertions": [{"type": "regex", "pattern": "x"}]}, Agent({})).error_role is None


def test_after_order_is_enforced():
    # "submitted" comes first, before "which type": done may not count until ask is reached
    agent = Agent({"first": "submitted? which one", "second": "which type?", "third": "submitted."})
    r = run(DYNAMIC, agent, Services(["first", "second", "third"]))
    assert r.status == "passed"
    reached = {c.id: c.reached_at_turn for c in r.checkpoints}
    assert reached == {"ask": 2, "done": 3}


def test_dependency_reached_earlier_in_the_same_turn_counts():
    case = {**DYNAMIC, "checkpoints": list(reversed(DYNAMIC["checkpoints"]))}  # dependent listed first
    r = run(case, Agent({"all": "which type? it is submitted."}), Services(["all"]))
    assert r.status == "passed"
    assert {c.id: c.reached_at_turn for c in r.checkpoints} == {"ask": 1, "done": 1}


def test_optional_checkpoints_never_block():
    case = {**DYNAMIC, "checkpoints": DYNAMIC["checkpoints"] + [{"id": "extra", "required": False, "assertion": {"type": "contains", "value": "never"}}]}
    r = run(case, Agent(AGENT), Services(["expense", "travel"]))
    assert r.status == "passed"
    assert {c.id: c.reached for c in r.checkpoints}["extra"] is False


def test_tool_calls_are_neither_awaiting_nor_completed_in_dynamic_mode():
    tool_reply = Reply(content="", tool_calls=[ToolCall(name="lookup", arguments={})])
    r = run(DYNAMIC, Agent({"expense": "which type?", "look": tool_reply, "travel": "submitted."}), Services(["expense", "look", "travel"]))
    assert r.status == "passed"
    assert r.turns[1].awaiting_reason == "tool_calls"


def test_static_awaiting_after_the_last_turn_is_skipped_with_the_question():
    r = run({"id": "s", "turns": [{"input": "big"}]}, Agent({"big": "This requires approval. Please provide PO number."}))
    assert r.status == "skipped"
    assert r.awaiting_question == "Please provide PO number."
    assert "--interactive" in r.hint


def test_static_awaiting_fails_when_asked_to():
    r = run({"id": "s", "turns": [{"input": "big"}]}, Agent({"big": "Which one?"}), on_missing_input="fail")
    assert r.status == "failed"


def test_single_turn_question_is_not_skipped():
    r = run({"id": "s", "input": "hello", "assertions": [{"type": "contains", "value": "hi"}]}, Agent(AGENT))
    assert r.status == "passed"
    assert r.turns[0].awaiting_input is True


def test_static_with_simulator_continues_until_the_agent_completes():
    case = {"id": "s", "turns": [{"input": "expense"}], "simulator": {"use": "sim"}, "max_turns": 5}
    services = Services(["travel"])
    r = run(case, Agent(AGENT), services)
    assert r.status == "passed"
    assert [t.input_source for t in r.turns] == ["static", "simulated"]
    assert services.seen[0]["test_mode"] == "simulator"


def test_static_stops_at_the_first_failed_turn():
    agent = Agent(AGENT)
    case = {"id": "s", "turns": [{"input": "hello", "assertions": [{"type": "contains", "value": "nope"}]}, {"input": "expense"}]}
    r = run(case, agent)
    assert r.status == "failed" and r.total_turns == 1 and agent.calls == 1


def test_final_assertions_read_tool_results_and_variables():
    tool_reply = Reply(content="", tool_calls=[ToolCall(id="c1", name="create", arguments={"amount": 5})])
    case = {
        "id": "s",
        "input": "make",
        "tool_mocks": {"create": {"expense": {"status": "draft", "amount": 5}}},
        "variables": {"owner": "ana"},
        "final_assertions": [
            {"type": "json_path", "path": "$.expense.amount", "value": 5},
            {"type": "json_path", "path": "$.owner", "value": "ana"},
        ],
    }
    r = run(case, Agent({"make": tool_reply}))
    assert r.status == "passed", r.error
    assert r.turns[0].steps == 2 and r.turns[0].output.startswith("tool said")
    assert r.turns[0].tool_calls[0].mocked is True


def test_unmocked_tool_calls_end_the_turn_and_get_an_ok_result():
    tool_reply = Reply(content="", tool_calls=[ToolCall(name="create", arguments={})])
    agent = Agent({"make": tool_reply})
    r = run({"id": "s", "turns": [{"input": "make"}, {"input": "again"}]}, agent)
    assert r.status == "passed"
    assert r.turns[0].steps == 1 and r.turns[0].tool_calls[0].result == {"status": "ok"}


def test_turn_timeout_gives_status_timeout():
    r = run({"id": "s", "input": "slow"}, Agent({"slow": 1.0}), turn_timeout=0.2)
    assert r.status == "timeout"
    assert "turn timeout" in r.error


class FailingMock(Services):
    async def mock_tool(self, mock, arguments):
        raise ValueError("no such expense")


def test_a_result_says_which_side_ended_the_conversation():
    tool_reply = Reply(content="", tool_calls=[ToolCall(id="c1", name="create", arguments={})])
    mocked = {"id": "s", "input": "make", "tool_mocks": {"create": "scripts:mocks.create"}}
    ended = {
        "passed": run({"id": "s", "input": "hello"}, Agent(AGENT)),
        "failed": run({"id": "s", "input": "hello", "assertions": [{"type": "contains", "value": "nope"}]}, Agent(AGENT)),
        "agent": run({"id": "s", "input": "slow"}, Agent({"slow": 1.0}), turn_timeout=0.2),
        "case_timeout": run({**DYNAMIC, "timeout": "0.3s"}, Agent({"slow": 2.0}), Services(["slow"])),
        "simulator": run(DYNAMIC, Agent(AGENT), Services(RoleError("no JSON in the answer"))),
        "tool_mock": run(mocked, Agent({"make": tool_reply}), FailingMock([])),
    }
    assert {name: (r.status.value, r.ended_by) for name, r in ended.items()} == {
        "passed": ("passed", None),
        "failed": ("failed", None),
        "agent": ("timeout", "agent"),
        "case_timeout": ("timeout", "case_timeout"),
        "simulator": ("error", "simulator"),
        "tool_mock": ("error", "tool_mock"),
    }
    assert [name for name, r in ended.items() if r.agent_failed] == ["agent", "case_timeout"]


def test_invalid_case_is_an_error_result():
    r = run({"id": "x", "turns": [{"input": "a"}], "simulator": {"use": "s"}, "checkpoints": [{"id": "c", "assertion": {"type": "contains", "value": "a"}}]}, Agent({}))
    assert r.status == "error"
    assert "both 'turns' and 'checkpoints'" in r.error


def test_no_simulator_anywhere_is_an_error():
    case = {**DYNAMIC, "simulator": {}}
    r = run(case, Agent(AGENT), Services([]))
    assert r.status == "error" and "--simulator" in r.error


@pytest.mark.parametrize("declared", ["static", "dynamic"])
def test_explicit_mode_must_agree(declared):
    case = {"id": "m", "mode": declared, "input": "hello"} if declared == "dynamic" else {"id": "m", "mode": "static", **{k: v for k, v in DYNAMIC.items() if k != "id"}}
    r = run(case, Agent(AGENT), Services([]))
    assert r.status == "error" and "'mode'" in r.error


def test_a_reply_longer_than_a_row_keeps_is_judged_whole_and_cut_when_written():
    from farm.results import OUTPUT_LIMIT

    reply = "x" * (OUTPUT_LIMIT + 10) + " needle"
    result = run({"id": "long", "input": "go", "assertions": [{"type": "contains", "value": "needle"}]},
                 Agent({"go": reply}))
    assert result.status == "passed"  # the assertion saw the end of the reply
    turn = json.loads(result.to_json_line())["turns"][0]
    assert len(turn["output"]) == OUTPUT_LIMIT and turn["output_chars"] == len(reply)
