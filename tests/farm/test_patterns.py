"""User regexes: a runaway pattern fails its own case within its time and holds up nothing else."""

from __future__ import annotations

import asyncio
import time

import pytest

from farm.agents.base import Reply, ToolCall
from farm.assertions import Subject, evaluate
from farm.assertions.patterns import PatternTimeout, search, search_blocking
from farm.cases import AssertionSpec
from farm.conversation.runner import RunSettings, run_case
from farm.suite.loader import parse_cases

RUNAWAY = r"(a|aa)+$"
"""Backtracks catastrophically even in ``regex`` (which handles ``(a+)+$`` at once)."""
EVIL = "a" * 40 + "!"
ISSUE = r"(a+)+$"
"""The pattern of the report: hangs ``re``, finishes in ``regex``."""


class EchoAgent:
    """Answers every user message with the message itself (after a small pause, like a network)."""

    async def send(self, messages, options):
        await asyncio.sleep(0.01)
        text = messages[-1]["content"]
        if text == "tool":
            return Reply(content="", tool_calls=[ToolCall(id="c1", name="lookup", arguments={})])
        return Reply(content=text)

    async def aclose(self):
        pass


def test_python_syntax_and_semantics_are_kept():
    assert search_blocking(r"(?P<n>\d+)-(?P=n)", "12-12")
    assert search_blocking(r"(?i)HELLO\b", "say hello there")
    assert not search_blocking(r"^world", "hello world")
    assert search_blocking(r"\Aa.c\Z", "abc")


def test_a_runaway_search_stops_at_its_limit():
    with pytest.raises(PatternTimeout, match=r"ran past 300ms"):  # stopped, not left to run its minutes
        asyncio.run(search(RUNAWAY, EVIL, limit=0.3))


def test_a_runaway_search_does_not_block_the_event_loop():
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        with pytest.raises(PatternTimeout):
            await search(RUNAWAY, EVIL, limit=0.5)
        task.cancel()
        return ticks

    assert asyncio.run(main()) >= 10  # ~50 ticks of 10 ms fit in 0.5 s when the loop is free (1 when it is held)


def test_a_negated_runaway_regex_still_fails():
    spec = AssertionSpec.model_validate({"type": "regex", "pattern": RUNAWAY, "negate": True, "message": "custom"})
    result = asyncio.run(evaluate(spec, Subject(content=EVIL, time_limit=0.2)))
    assert not result.passed and "ran past" in result.message


def test_runaway_case_fails_alone_and_innocent_cases_on_the_same_loop_finish_quickly():
    cases = [("t.jsonl:1", {"id": "runaway", "input": EVIL, "assertions": [{"type": "regex", "pattern": RUNAWAY}]})]
    cases.append(("t.jsonl:8", {"id": "issue", "input": EVIL, "assertions": [{"type": "regex", "pattern": ISSUE}]}))
    for n in range(3):
        assertions = [{"type": "regex", "pattern": r"^hello \d$"}, {"type": "contains", "value": "hello"}]
        cases.append((f"t.jsonl:{n + 2}", {"id": f"innocent-{n}", "input": f"hello {n}", "assertions": assertions}))
    cases.append(
        (
            "t.jsonl:9",
            {
                "id": "runaway-tool",
                "input": "tool",
                "tool_mocks": {"lookup": {"text": EVIL}},
                "assertions": [{"type": "tool_result", "tool": "lookup", "result": {"text": f"regex:{RUNAWAY}"}}],
            },
        )
    )
    loaded = parse_cases(cases)
    settings = RunSettings(turn_timeout=1.0, case_timeout=30.0)

    async def main():
        agent = EchoAgent()
        finished: dict[str, float] = {}
        started = time.monotonic()

        async def one(case):
            result = await run_case(case, agent, None, settings)
            finished[result.id] = time.monotonic() - started
            return result

        results = await asyncio.gather(*(one(case) for case in loaded))
        return {r.id: r for r in results}, finished

    results, finished = asyncio.run(main())
    for n in range(3):
        assert results[f"innocent-{n}"].status == "passed"
        # not held up by the runaway searches, which take their 1 s (a held loop ends them all together)
        assert finished[f"innocent-{n}"] < finished["runaway"] / 2, finished
    for case_id in ("runaway", "runaway-tool"):
        result = results[case_id]
        assert result.status == "failed", result.error
        assert "ran past 1s" in result.error
    assert results["issue"].status == "failed" and "expected the reply to match" in results["issue"].error
    assert finished["issue"] < finished["runaway"] / 2
