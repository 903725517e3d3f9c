"""farm.roles.player: each role's call (the built-in prompt, or the conversation as it is), its
answer read leniently, and one retry before a :class:`RoleError`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from farm.agents.base import AgentError, Message, Reply
from farm.roles.player import PROMPTS, RolePlayer, render_transcript
from farm.roles.types import RoleError


class ScriptedClient:
    """An agent client that answers from a list (a string is a reply, an exception is raised)
    and records what it was sent."""

    def __init__(self, *answers: str | Exception):
        self.answers = list(answers)
        self.calls: list[tuple[list[Message], dict[str, Any]]] = []
        self.closed = False

    async def send(self, messages: list[Message], options: dict[str, Any]) -> Reply:
        self.calls.append((messages, options))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Reply(content=answer)

    async def aclose(self) -> None:
        self.closed = True


CONVERSATION: list[Message] = [
    {"role": "user", "content": "I want to file an expense"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "function": {"name": "create_expense", "arguments": '{"amount": 3}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"id": 7}'},
    {"role": "assistant", "content": [{"type": "text", "text": "Filed as #7."}, {"type": "image_url"}]},
]


def test_render_transcript_shows_roles_tool_calls_and_results():
    assert render_transcript(CONVERSATION) == "\n".join(
        [
            "USER: I want to file an expense",
            'ASSISTANT CALLS TOOL create_expense({"amount": 3})',
            'TOOL RESULT (c1): {"id": 7}',
            "ASSISTANT: Filed as #7. [image_url]",
        ]
    )
    assert render_transcript([]) == ""


def test_the_builtin_prompt_is_filled_from_the_metadata():
    client = ScriptedClient('{"input": "hi", "goal_achieved": false}')
    player = RolePlayer("simulator", client)
    asyncio.run(player.simulate(CONVERSATION, {"persona": "a busy manager", "max_turns": 5}))
    (messages, options), = client.calls
    system, user = messages
    assert system["role"] == "system" and user["role"] == "user"
    assert "Persona: a busy manager" in system["content"]
    assert "Turn: (not given) of at most 5" in system["content"]  # a missing field, a number as JSON
    assert "Goal: (not given)" in system["content"]
    assert user["content"] == render_transcript(CONVERSATION)
    assert options == {"skip": {"history": True}, "metadata": {"persona": "a busy manager", "max_turns": 5, "test_mode": "simulator"}}


def test_the_validator_prompt_gets_the_criteria_and_the_rest_as_context():
    client = ScriptedClient('{"passed": true}')
    asyncio.run(RolePlayer("validator", client).validate(CONVERSATION, {"criteria": "polite", "case_id": "c"}))
    system = client.calls[0][0][0]["content"]
    assert "Criteria: polite" in system
    assert 'Additional context: {"case_id": "c", "test_mode": "validator"}' in system


def test_a_first_call_says_there_is_no_conversation_yet():
    client = ScriptedClient('{"input": "hello"}')
    asyncio.run(RolePlayer("simulator", client).simulate([], {}))
    assert client.calls[0][0][1]["content"] == "(no conversation yet: write the user's first message)"


def test_a_custom_prompt_replaces_the_builtin_one():
    client = ScriptedClient('{"input": "x"}')
    asyncio.run(RolePlayer("simulator", client, prompt="Be {persona}.").simulate([], {"persona": "terse"}))
    assert client.calls[0][0][0]["content"] == "Be terse."


def test_a_users_own_role_service_gets_the_conversation_as_it_is():
    client = ScriptedClient('{"input": "x"}')
    asyncio.run(RolePlayer("simulator", client, builtin_prompt=False).simulate(CONVERSATION, {"goal": "g"}))
    messages, options = client.calls[0]
    assert messages == CONVERSATION and messages is not CONVERSATION
    assert options["metadata"] == {"goal": "g", "test_mode": "simulator"}


@pytest.mark.parametrize(
    "answer",
    [
        '{"input": "next", "goal_achieved": true, "reasoning": "done"}',
        'Sure! ```json\n{"input": "next", "goal_achieved": true, "reasoning": "done"}\n```',
        'My answer is {"message": "next", "goal_achieved": 1, "reasoning": "done"} as asked.',
    ],
)
def test_the_simulators_answer_is_read_leniently(answer: str):
    turn = asyncio.run(RolePlayer("simulator", ScriptedClient(answer)).simulate([], {}))
    assert (turn.input, turn.goal_achieved, turn.reasoning) == ("next", True, "done")


def test_a_simulator_input_that_is_not_text_is_sent_as_json():
    turn = asyncio.run(RolePlayer("simulator", ScriptedClient('{"input": {"amount": 3}}')).simulate([], {}))
    assert turn.input == '{"amount": 3}'
    assert turn.goal_achieved is False


def test_an_unusable_answer_is_retried_once():
    client = ScriptedClient("I'd rather not say.", '{"input": "second try"}')
    turn = asyncio.run(RolePlayer("simulator", client).simulate([], {}))
    assert turn.input == "second try"
    assert len(client.calls) == 2


def test_two_unusable_answers_are_a_role_error():
    client = ScriptedClient("no json", "still no json", '{"input": "never asked"}')
    with pytest.raises(RoleError, match="the simulator answered no JSON: 'still no json'"):
        asyncio.run(RolePlayer("simulator", client).simulate([], {}))
    assert len(client.calls) == 2


def test_an_agent_error_is_retried_once_then_a_role_error():
    client = ScriptedClient(AgentError("HTTP 500"), '{"passed": false}')
    asyncio.run(RolePlayer("validator", client).validate([], {}))
    assert len(client.calls) == 2
    failing = ScriptedClient(AgentError("HTTP 500"), AgentError("HTTP 503"))
    with pytest.raises(RoleError, match="the validator agent failed: HTTP 503"):
        asyncio.run(RolePlayer("validator", failing).validate([], {}))


def test_json_of_the_wrong_shape_is_a_role_error_without_a_retry():
    client = ScriptedClient("[1, 2]", '{"input": "never asked"}')
    with pytest.raises(RoleError, match="the simulator's answer is not a JSON object"):
        asyncio.run(RolePlayer("simulator", client).simulate([], {}))
    assert len(client.calls) == 1
    with pytest.raises(RoleError, match="the validator's answer has no 'passed'"):
        asyncio.run(RolePlayer("validator", ScriptedClient('{"score": 1}')).validate([], {}))


@pytest.mark.parametrize(
    ("answer", "cases"),
    [
        ('{"cases": [{"id": "a"}, {"id": "b"}]}', [{"id": "a"}, {"id": "b"}]),
        ('[{"id": "a"}]', [{"id": "a"}]),
        ('Here: {"id": "only", "input": "hi"}', [{"id": "only", "input": "hi"}]),
    ],
)
def test_the_generator_answers_cases_in_three_shapes(answer: str, cases: list[Any]):
    client = ScriptedClient(answer)
    assert asyncio.run(RolePlayer("generator", client).generate({"count": 2, "target_agent": "t"})) == cases
    system = client.calls[0][0][0]["content"]
    assert "Generate 2 test cases" in system and "Target Agent: t" in system


def test_a_generator_answer_that_is_no_case_is_a_role_error():
    with pytest.raises(RoleError, match="neither"):
        asyncio.run(RolePlayer("generator", ScriptedClient("42")).generate({}))


def test_the_reporter_gets_the_summary_in_its_prompt_or_as_it_is():
    client = ScriptedClient("# Report")
    assert asyncio.run(RolePlayer("reporter", client).report({"passed": 3})) == "# Report"
    (messages, options), = client.calls
    assert [m["role"] for m in messages] == ["system"]
    assert '"passed": 3' in messages[0]["content"] and "test_mode: reporter" in messages[0]["content"]
    assert options["metadata"] == {"test_mode": "reporter"}
    own = ScriptedClient("text")
    asyncio.run(RolePlayer("reporter", own, builtin_prompt=False).report({"passed": 3}))
    assert own.calls[0][0] == [{"role": "user", "content": '{"passed": 3}'}]


def test_run_once_closes_the_client():
    client = ScriptedClient('{"cases": []}')
    assert RolePlayer("generator", client).run_once(lambda player: player.generate({})) == []
    assert client.closed


def test_prompt_from_reads_a_file_relative_to_the_config(tmp_path):
    (tmp_path / "judge.txt").write_text("Judge {criteria}.")
    assert RolePlayer.prompt_from("judge.txt", tmp_path) == "Judge {criteria}."
    assert RolePlayer.prompt_from(str(tmp_path / "judge.txt"), tmp_path / "elsewhere") == "Judge {criteria}."
    assert RolePlayer.prompt_from(None, tmp_path) is None


def test_every_role_has_a_builtin_prompt_that_names_its_mode():
    for role, prompt in PROMPTS.items():
        assert f"test_mode: {role}" in prompt


def test_a_python_simulator_may_answer_a_dict():
    from farm.agents.python import PythonAgent
    from farm.config import AgentConfig

    def simulator(messages: list[Message], options: dict[str, Any]) -> dict[str, Any]:
        return {"input": f"hello after {len(messages)} messages", "goal_achieved": False, "reasoning": options["metadata"]["goal"]}

    agent = PythonAgent(AgentConfig(id="sim", kind="python", entry="x:y"), fn=simulator)
    turn = asyncio.run(RolePlayer("simulator", agent, builtin_prompt=False).simulate(CONVERSATION, {"goal": "file it"}))
    assert (turn.input, turn.goal_achieved, turn.reasoning) == ("hello after 4 messages", False, "file it")


def test_a_plain_text_answer_names_the_keys_a_simulator_must_answer():
    client = ScriptedClient("Hi, I need help.", "Hi, I need help.")
    with pytest.raises(RoleError) as caught:
        asyncio.run(RolePlayer("simulator", client).simulate([], {}))
    message = str(caught.value)
    assert message.startswith("the simulator answered no JSON: 'Hi, I need help.'; it must answer {\"input\"")
    assert '"goal_achieved"' in message and '"reasoning"' in message


def test_an_empty_answer_says_nothing_was_answered():
    with pytest.raises(RoleError, match=r"^the simulator answered nothing; it must answer \{\"input\""):
        asyncio.run(RolePlayer("simulator", ScriptedClient("", " ")).simulate([], {}))


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ('{"text": "hi"}', "the simulator's answer has no 'input' (its keys: 'text') and does not say 'goal_achieved'"),
        ('{"input": "hi", "goal_achieved": "maybe"}', "the simulator's 'goal_achieved' is 'maybe', not true or false"),
        ('["hi"]', "the simulator's answer is not a JSON object but list"),
    ],
)
def test_an_answer_of_the_wrong_shape_names_the_keys_it_wants(answer: str, says: str):
    with pytest.raises(RoleError) as caught:
        asyncio.run(RolePlayer("simulator", ScriptedClient(answer)).simulate([], {}))
    assert str(caught.value).startswith(says)
    assert '{"input": "the user\'s next message", "goal_achieved": true or false, "reasoning": "why"}' in str(caught.value)


def test_goal_achieved_written_as_text_is_read():
    turn = asyncio.run(RolePlayer("simulator", ScriptedClient('{"goal_achieved": "True"}')).simulate([], {}))
    assert (turn.input, turn.goal_achieved) == (None, True)


def test_the_attributor_is_told_the_goal_and_the_checkpoints_and_answers_a_blame():
    client = ScriptedClient('{"blame": "Simulator", "reason": "it  left its goal"}')
    metadata = {"goal": "file an expense", "checkpoints": "done (required; NOT reached): contains \"submitted\"", "outcome": "max turns"}
    assert asyncio.run(RolePlayer("attributor", client).attribute(CONVERSATION, metadata)) == ("simulator", "it left its goal")
    system = client.calls[0][0][0]["content"]
    assert "Goal of the simulated user: file an expense" in system and 'done (required; NOT reached): contains "submitted"' in system
    assert "Persona: (not given)" in system and "test_mode: attributor" in system


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ('{"blame": "user", "reason": "x"}', "the attributor's 'blame' is 'user' (its keys: 'blame', 'reason'), not one of agent, simulator, checkpoint, unknown"),
        ('{"who": "agent"}', "the attributor's 'blame' is 'null' (its keys: 'who')"),
        ("[1]", "the attributor's answer is not a JSON object but list"),
    ],
)
def test_an_attributor_answer_of_the_wrong_shape_names_the_keys_it_wants(answer: str, says: str):
    with pytest.raises(RoleError) as caught:
        asyncio.run(RolePlayer("attributor", ScriptedClient(answer)).attribute([], {}))
    assert str(caught.value).startswith(says)
    assert '{"blame": "agent", "simulator", "checkpoint" or "unknown", "reason": "one sentence"}' in str(caught.value)
