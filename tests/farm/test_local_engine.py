"""The local engine's loop: a slot that frees takes its next case before any result is written.

With a hundred conversations in flight, their replies come back close together; were each
result written (JSONL, Parquet buffers, the console) before the next cases were sent, every
slot would wait for the others' bookkeeping, and each wave of replies would cost the whole run
that time again. The agent here is a Python function that counts, each time it is called,
the results already in the JSONL: with one slot, the second case is called before the first
is written.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

import farm

AGENT = """
import asyncio
from pathlib import Path

RESULTS = Path({results!r})


async def reply(messages, options):
    written = len(RESULTS.read_text().splitlines()) if RESULTS.exists() else 0
    await asyncio.sleep(0.05)  # an agent that takes a while: the loop goes round while it answers
    return f"written before this call: {{written}}"
"""

FARM_TOML = """
[farm]
results_dir = "results"
default_agent = "counter"

[agents.counter]
kind = "python"
entry = "{module}:reply"
"""


def test_a_freed_slot_sends_its_next_case_before_the_ended_one_is_written(tmp_path: Path, python_project):
    results = tmp_path / "out.jsonl"
    python_project(AGENT.format(results=str(results)), FARM_TOML, {})
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "input": f"Hello {i}"}) + "\n" for i in range(4)))

    run = farm.run(str(suite), config=tmp_path / "farm.toml", engine="local", parallel=1, output=results, quiet=True)

    assert run.exit_code == 0
    seen = {line["id"]: line["turns"][0]["output"] for line in map(json.loads, results.read_text().splitlines())}
    # one slot: c1 starts as soon as c0 ends, before c0 is written; c2 likewise before c1 ...
    assert seen == {f"c{i}": f"written before this call: {max(0, i - 1)}" for i in range(4)}


ENGINE_AGENT = """
import asyncio

CALLS = []
FIRST_WRITTEN = asyncio.Event()


async def reply(messages, options):
    text = messages[-1]["content"]
    CALLS.append(text)
    if text == "cancel":  # an agent whose own task handling leaks a cancellation
        raise asyncio.CancelledError()
    if text == "slow":  # answers once the first result is written
        await FIRST_WRITTEN.wait()
    elif text == "quick":  # ends in its first step
        pass
    else:
        await asyncio.sleep(0.05)
    return "ok"
"""


def engine_plan(tmp_path: Path, python_project, inputs: list[str], parallel: int):
    """A plan for the local engine over cases with these inputs, on a Python agent that records its
    calls (and the agent's module)."""
    import importlib

    from farm.config import load_config
    from farm.conversation.runner import RunSettings
    from farm.engines import RunPlan
    from farm.suite.loader import parse_cases

    module = python_project(ENGINE_AGENT, '[agents.target]\nkind = "python"\nentry = "{module}:reply"\n', {})
    cases = parse_cases([(f"suite:{i}", {"id": f"c{i}", "input": text}) for i, text in enumerate(inputs)])
    plan = RunPlan(config=load_config(tmp_path / "farm.toml"), cases=cases, settings=RunSettings(agent_id="target", run_id="r"), parallel=parallel)
    return plan, importlib.import_module(module)


def test_a_case_that_ends_cancelled_is_an_error_and_the_run_goes_on(tmp_path: Path, python_project):
    from farm.engines.local import LocalEngine

    plan, _ = engine_plan(tmp_path, python_project, ["a", "cancel", "b", "c"], parallel=2)
    results = []
    done = threading.Thread(target=lambda: LocalEngine().run(plan, results.append), daemon=True)
    done.start()
    done.join(30)
    assert not done.is_alive(), "the run waited forever for a case that had ended"
    statuses = {r.id: r.status.value for r in results}
    assert statuses == {"c0": "passed", "c1": "error", "c2": "passed", "c3": "passed"}
    assert "CancelledError" in next(r.error for r in results if r.id == "c1")


def test_a_writer_that_fails_stops_the_run_and_no_case_starts_after_it(tmp_path: Path, python_project):
    from farm.engines.local import LocalEngine

    plan, agent = engine_plan(tmp_path, python_project, ["a", "b", "slow", "d", "e", "f", "g", "h"], parallel=3)
    written: list[str] = []
    calls_then: list[int] = []

    def on_result(result) -> None:
        written.append(result.id)
        if len(written) == 1:
            agent.FIRST_WRITTEN.set()  # "slow" ends while the next results are written
        if len(written) == 2:
            calls_then.append(len(agent.CALLS))
            raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError, match="the disk is full"):
        LocalEngine().run(plan, on_result)
    assert calls_then and len(agent.CALLS) == calls_then[0]  # the agent was called for no case after it


def test_an_interrupt_keeps_the_cases_that_had_ended(tmp_path: Path, python_project):
    """c0 and c1 end together; c2 ends while c0 is written, and the interrupt comes as c1 is:
    c2's end is then still queued in the loop (its done-callback not yet called), but it ran,
    and is written (a resume does not run it again)."""
    from farm.engines.local import LocalEngine

    plan, agent = engine_plan(tmp_path, python_project, ["quick", "quick", "slow"], parallel=3)
    written: list[str] = []

    def on_result(result) -> None:
        written.append(result.id)
        if len(written) == 1:
            agent.FIRST_WRITTEN.set()
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LocalEngine().run(plan, on_result)
    assert sorted(written) == ["c0", "c1", "c2"]
