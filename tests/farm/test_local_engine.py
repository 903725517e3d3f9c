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
from pathlib import Path

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
