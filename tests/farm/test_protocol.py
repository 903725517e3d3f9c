"""Replies that break the chat-completions protocol are errors of the agent, not failed assertions."""

from __future__ import annotations

import asyncio

import pytest

from farm.agents.http import HTTPAgent
from farm.agents.openai import OpenAIAgent
from farm.config import AgentConfig, Connector
from farm.conversation.runner import RunSettings, run_case
from farm.demo.server import JSONServer, Response
from farm.suite.loader import parse_cases


def body(message):
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


MALFORMED = {
    "null message": (body(None), "choices[0].message is null, not an object"),
    "number content": (body({"role": "assistant", "content": 42}), "choices[0].message.content is a number"),
    "object content": (body({"role": "assistant", "content": {"text": "hi"}}), "content is an object"),
    "junk content part": (body({"role": "assistant", "content": ["hi", 7]}), "content[1] is a number"),
    "tool_calls string": (body({"role": "assistant", "content": "", "tool_calls": "lookup"}), "tool_calls is a string, not a list"),
    "tool_calls object": (body({"role": "assistant", "content": "", "tool_calls": {"name": "x"}}), "tool_calls is an object"),
    "junk tool calls": (body({"role": "assistant", "content": "", "tool_calls": [1, "x"]}), "tool_calls[0] is a number"),
    "nameless call": (body({"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}), "tool_calls[0] has no name"),
}


@pytest.fixture(scope="module")
def server():
    def handler(path, request, headers):
        text = request["messages"][-1]["content"]
        if text in MALFORMED:
            return Response(MALFORMED[text][0])
        if text == "http junk calls":
            return Response({"content": "ok", "tool_calls": "not a list"})
        return Response(body({"role": "assistant", "content": "fine", "tool_calls": None}))

    with JSONServer(handler) as s:
        yield s


def run(agent, text: str):
    case = {"id": "c", "input": text, "assertions": [{"type": "tool_called", "name": "lookup"}]}
    (loaded,) = parse_cases([("t.jsonl:1", case)])

    async def main():
        try:
            return await run_case(loaded, agent, None, RunSettings(agent_id="target"))
        finally:
            await agent.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_openai_reply_is_an_error_saying_what_was_wrong(server, name):
    agent = OpenAIAgent(Connector(name="c", base_url=f"{server.url}/v1", max_retries=0), AgentConfig(id="target"))
    result = run(agent, name)
    assert result.status == "error", result.error
    assert MALFORMED[name][1] in result.error
    assert "Cannot read the reply of agent 'target'" in result.error
    assert result.turns[0].assertions == []  # no assertion judged a broken reply


def test_a_well_formed_reply_with_null_tool_calls_is_judged_normally(server):
    agent = OpenAIAgent(Connector(name="c", base_url=f"{server.url}/v1", max_retries=0), AgentConfig(id="target"))
    result = run(agent, "hello")
    assert result.status == "failed" and "no tool was called" in result.error


def test_an_http_agent_with_tool_calls_that_are_not_a_list_is_an_error(server):
    agent = HTTPAgent(None, AgentConfig(id="target", kind="http", url=f"{server.url}/chat"))
    result = run(agent, "http junk calls")
    assert result.status == "error"
    assert "the tool calls at $.tool_calls is a string, not a list" in result.error
