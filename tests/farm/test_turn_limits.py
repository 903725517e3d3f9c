"""What a turn records beyond its reply: retried requests (429 backoff) and a tool loop that hit its limit."""

from __future__ import annotations

import asyncio
import io
import threading
import time

from rich.console import Console

from farm.agents.base import Reply, ToolCall
from farm.agents.openai import OpenAIAgent
from farm.agents.retry import RATE_LIMIT_BASE, RATE_LIMIT_CAP, backoff_delay
from farm.config import AgentConfig, Connector
from farm.console import ConsoleReporter
from farm.conversation.runner import RunSettings, run_case
from farm.demo.server import JSONServer, Response, chat_completion
from farm.reports.html import HTMLWriter
from farm.reports.junit import JUnitWriter
from farm.suite.loader import parse_cases


class Limiter:
    def __init__(self):
        self.backoffs: list[float] = []

    async def acquire(self, tokens):
        pass

    def release(self, tokens_used):
        pass

    def backoff(self, seconds):
        self.backoffs.append(seconds)


def run(case: dict, agent, **settings):
    (loaded,) = parse_cases([("t.jsonl:1", case)])
    return asyncio.run(run_case(loaded, agent, None, RunSettings(**settings)))


def test_429_backoff_without_retry_after_spans_a_per_minute_window():
    for _ in range(20):
        waits = [backoff_delay(n, base=RATE_LIMIT_BASE, cap=RATE_LIMIT_CAP) for n in range(1, 6)]  # the default 5 retries
        assert sum(waits) >= 60.0
        assert all(w <= RATE_LIMIT_CAP for w in waits)
        assert RATE_LIMIT_BASE / 2 <= waits[0] <= RATE_LIMIT_BASE


def test_a_429_without_retry_after_backs_off_the_connector_and_is_recorded_in_the_turn():
    seen = []
    lock = threading.Lock()

    def handler(path, body, headers):
        with lock:
            seen.append(time.monotonic())
            first = len(seen) == 1
        if first:
            return Response({"error": {"message": "slow down"}}, status=429)  # LiteLLM style: no Retry-After
        return Response(chat_completion("fine"))

    limiter = Limiter()
    with JSONServer(handler) as server:
        agent = OpenAIAgent(Connector(name="c", base_url=f"{server.url}/v1", max_retries=1), AgentConfig(id="t"), limiter=limiter)
        result = run({"id": "c", "input": "hi", "assertions": [{"type": "contains", "value": "fine"}]}, agent)
        asyncio.run(agent.aclose())
    assert result.status == "passed", result.error
    assert result.turns[0].retries == 1
    assert len(limiter.backoffs) == 1 and RATE_LIMIT_BASE / 2 <= limiter.backoffs[0] <= RATE_LIMIT_BASE
    assert seen[1] - seen[0] >= limiter.backoffs[0] - 0.05  # it really waited that long


class LoopingAgent:
    """Calls the mocked tool after every result it gets, forever."""

    def __init__(self):
        self.calls = 0

    async def send(self, messages, options):
        self.calls += 1
        return Reply(content="checking", tool_calls=[ToolCall(id=f"c{self.calls}", name="lookup", arguments={})])

    async def aclose(self):
        pass


LOOP_CASE = {"id": "loop", "input": "go", "tool_mocks": {"lookup": {"ok": True}}, "assertions": [{"type": "tool_called", "name": "lookup"}]}


def test_the_tool_loop_says_when_it_stopped_at_the_default_limit():
    agent = LoopingAgent()
    result = run(LOOP_CASE, agent)
    turn = result.turns[0]
    assert agent.calls == 8 and turn.steps == 8
    assert turn.note == "stopped after 8 tool steps (max_tool_steps): the agent was still calling mocked tools"
    assert result.status == "passed"


def test_max_tool_steps_from_the_case_wins_over_the_agent():
    agent = LoopingAgent()
    result = run({**LOOP_CASE, "max_tool_steps": 3}, agent, max_tool_steps=5)
    assert agent.calls == 3 and "stopped after 3 tool steps" in result.turns[0].note
    agent = LoopingAgent()
    result = run(LOOP_CASE, agent, max_tool_steps=2)
    assert agent.calls == 2 and "stopped after 2 tool steps" in result.turns[0].note


def test_a_turn_that_ends_by_itself_has_no_note():
    class Once(LoopingAgent):
        async def send(self, messages, options):
            self.calls += 1
            if self.calls == 1:
                return await super().send(messages, options)
            return Reply(content="done.")

    result = run(LOOP_CASE, Once())
    assert result.turns[0].steps == 2 and result.turns[0].note is None


def test_the_note_shows_in_the_console_junit_and_html(tmp_path):
    result = run({**LOOP_CASE, "max_tool_steps": 2}, LoopingAgent())
    out = io.StringIO()
    ConsoleReporter(Console(file=out, width=200, color_system=None)).case(result)
    assert "stopped after 2 tool steps" in out.getvalue()
    verbose = io.StringIO()
    ConsoleReporter(Console(file=verbose, width=200, color_system=None), verbose=True).case(result)
    assert "Note: stopped after 2 tool steps" in verbose.getvalue()
    for writer_type, name in ((JUnitWriter, "junit.xml"), (HTMLWriter, "report.html")):
        writer = writer_type(tmp_path / name, "run-1")
        writer.write(result)
        writer.close()
        assert "stopped after 2 tool steps" in (tmp_path / name).read_text()
