"""farm.roles.generation: the case stream's bookkeeping, with generators played by plain functions.

A ``generate`` here is an async function of the request (the seam every engine fills); the
integration tests with an LLM-like generator behind HTTP are in tests/cli/test_generation.py.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from farm.config import load_config
from farm.errors import UsageError
from farm.inputs import resolve_input
from farm.roles.cache import RoleCache
from farm.roles.generation import GENERATED_JSONL, CaseStream, collect
from farm.roles.types import RoleError, RoleRequest

FARM_TOML = """
[farm]
results_dir = "results"

[agents.target]
kind = "python"
entry = "x:y"

[agents.gen]
kind = "python"
entry = "x:y"

[agents.hot]
kind = "python"
entry = "x:y"
temperature = 0.7
"""


@pytest.fixture
def config(tmp_path: Path):
    (tmp_path / "farm.toml").write_text(FARM_TOML)
    return load_config(tmp_path / "farm.toml")


def stream_of(config, query: str, cache: RoleCache | None = None) -> CaseStream:
    suite = resolve_input(f"agents:gen?{query}", config, "target", cache=cache)
    assert suite.cases == [] and suite.feed.stream is not None
    return suite.feed.stream


class Writer:
    """A generator as a function: ``write(request) -> cases``, recording every request."""

    def __init__(self, write):
        self.write = write
        self.requests: list[RoleRequest] = []

    async def __call__(self, request: RoleRequest) -> list[Any]:
        self.requests.append(request)
        await asyncio.sleep(0)
        return self.write(request)


def numbered(request: RoleRequest) -> list[dict[str, Any]]:
    """New cases in every batch, ids starting again at 1 (as an LLM writes them)."""
    b = request.metadata["batch_number"]
    return [{"id": f"case-{i}", "input": f"batch {b} case {i}"} for i in range(1, request.metadata["count"] + 1)]


def test_generated_jsonl_keeps_a_field_the_generator_set_to_its_default(config, tmp_path: Path):
    null_value = {"type": "json_path", "path": "$.a", "value": None}  # "value": null, not "value" left out

    def with_null(request: RoleRequest) -> list[dict[str, Any]]:
        return [{**case, "assertions": [null_value]} for case in numbered(request)]

    stream = stream_of(config, "count=2&batch=2")
    stream.open(tmp_path / "run")
    collect(stream, Writer(with_null))
    written = [json.loads(line) for line in (tmp_path / "run" / GENERATED_JSONL).read_text().splitlines()]
    assert [case["assertions"] for case in written] == [[null_value], [null_value]]


def test_count_gets_exactly_that_many_distinct_cases_in_batches(config):
    stream = stream_of(config, "count=45&batch=10")
    writer = Writer(numbered)
    cases = collect(stream, writer)
    assert len(cases) == 45 and len({c.id for c in cases}) == 45
    assert [r.metadata["count"] for r in writer.requests] == [10, 10, 10, 10, 5]  # no more than needed
    assert sorted(r.metadata["batch_number"] for r in writer.requests) == list(range(1, len(writer.requests) + 1))
    assert stream.stats.kept == 45 and stream.stats.batches == len(writer.requests) == 5
    assert stream.stats.stop_reason is None
    # ids written again in every batch are renamed, and the renames recorded
    assert stream.stats.renamed == 35 and "case-1 -> case-1-2 (agents:gen batch 2, case 1)" in stream.stats.renames


def test_every_request_differs_and_carries_seed_and_what_to_avoid(config):
    stream = stream_of(config, "count=30&batch=10&seed=7")
    stream.parallel = 1  # one at a time, so each request sees the cases before it
    writer = Writer(numbered)
    collect(stream, writer)
    first, second, third = (r.metadata for r in writer.requests)
    assert first["seed"] == second["seed"] == 7
    assert first["avoid"] == [] and second["avoid"][0] == "case-10: batch 1 case 10"
    assert len(third["avoid"]) == 20 and third["total"] == 30
    assert len({json.dumps(r.metadata, sort_keys=True) for r in writer.requests}) == 3


def test_the_avoid_list_is_bounded(config):
    stream = stream_of(config, "count=400&batch=20")
    stream.parallel = 1
    writer = Writer(lambda r: [{"id": f"c{r.metadata['batch_number']}-{i}", "input": f"{r.metadata['batch_number']} {i} " + "word " * 50} for i in range(20)])
    collect(stream, writer)
    last = writer.requests[-1].metadata["avoid"]
    assert 0 < len(last) <= 40 and sum(len(line) + 2 for line in last) <= 2000
    assert all(line.endswith("…") for line in last)  # the first words only


def test_duplicates_are_dropped_and_malformed_cases_named_by_batch_and_case(config):
    def write(request: RoleRequest) -> list[Any]:
        if request.metadata["batch_number"] > 1:
            return []
        return [
            {"id": "refund", "input": "I want a refund"},
            {"id": "refund-again", "input": "  i want A   refund "},  # the same input, normalised
            {"id": "bad", "input": "x", "assertions": [{"type": "contians", "value": "y"}]},
            {"id": "refund", "input": "Refund my taxi"},  # a different case under a taken id
            "not a case",
            {"id": "dyn", "simulator": {"use": "agents:gen", "goal": "get a refund"}, "checkpoints": [{"id": "a", "assertion": {"type": "contains", "value": "ok"}}]},
            {"id": "dyn-2", "simulator": {"use": "agents:gen", "goal": "Get a  refund"}, "checkpoints": [{"id": "b", "assertion": {"type": "contains", "value": "ok"}}]},
        ]

    stream = stream_of(config, "count=10&patience=2")
    stream.parallel = 1
    problems: list[str] = []
    from farm.aio import run_sync

    async def drain() -> list:
        return [c async for batch in stream.batches(Writer(write), on_problem=problems.append) for c in batch]

    cases = run_sync(drain())
    assert [c.id for c in cases] == ["refund", "refund-2", "dyn"]
    stats = stream.stats
    assert (stats.kept, stats.duplicates, stats.malformed, stats.renamed) == (3, 2, 2, 1)
    assert problems[0] == "agents:gen batch 1, case 3: field 'assertions[0].type': unknown assertion type 'contians' (did you mean 'contains'?)"
    assert problems[1] == "agents:gen batch 1, case 5: a case must be a JSON object"
    assert stats.problems == problems
    assert stats.stop_reason == "generated 3 of the 10 cases asked: the last 2 batches added no new valid case"


def test_a_case_naming_what_the_config_lacks_is_malformed(config):
    writer = Writer(lambda r: [{"id": "judged", "input": "x", "assertions": [{"type": "agent", "use": "agents:nobody"}]}, {"id": "fine", "input": "y"}])
    stream = stream_of(config, "count=2&patience=1")
    problems: list[str] = []
    from farm.aio import run_sync

    async def drain() -> list:
        return [c async for batch in stream.batches(writer, on_problem=problems.append) for c in batch]

    assert [c.id for c in run_sync(drain())] == ["fine"]
    assert "agent 'nobody' is not configured" in problems[0]


def test_coverage_lists_are_spread_evenly_over_the_batches_and_recorded_on_each_case(config):
    stream = stream_of(config, "count=40&batch=5&focus=refunds,travel&complexity=low&complexity=high")

    def write(r: RoleRequest) -> list[dict[str, Any]]:
        meta = r.metadata
        return [{"id": f"c{meta['batch_number']}-{i}", "input": f"{meta['focus']} {meta['complexity']} {meta['batch_number']} {i}"} for i in range(meta["count"])]

    writer = Writer(write)
    cases = [c.materialized().case for c in collect(stream, writer)]
    slices = Counter(tuple(sorted(c.tags)) for c in cases)
    assert slices == {
        ("complexity:high", "focus:refunds"): 10,
        ("complexity:high", "focus:travel"): 10,
        ("complexity:low", "focus:refunds"): 10,
        ("complexity:low", "focus:travel"): 10,
    }
    for case in cases:  # each case was written for its own slice
        focus = next(t for t in case.tags if t.startswith("focus:")).split(":")[1]
        assert case.input.startswith(focus)
    assert {json.dumps(r.metadata["slice"], sort_keys=True) for r in writer.requests} == {
        json.dumps({"focus": f, "complexity": c}, sort_keys=True) for f in ("refunds", "travel") for c in ("low", "high")
    }


def test_a_generator_that_repeats_itself_stops_with_one_sentence(config):
    pool = [{"id": f"p{i}", "input": f"pooled case {i}"} for i in range(30)]
    writer = Writer(lambda r: pool[(r.metadata["batch_number"] * 7) % 30:][:10] or pool[:10])
    stream = stream_of(config, "count=100&batch=10")
    cases = collect(stream, writer)
    assert len(cases) == stream.stats.kept <= 30
    assert stream.stats.stop_reason == f"generated {len(cases)} of the 100 cases asked: the last 5 batches repeated earlier cases"
    assert stream.stats.duplicates > 0


def test_a_failing_generator_stops_generation_with_its_error(config):
    async def broken(request: RoleRequest) -> list[Any]:
        raise RoleError("the generator agent failed: HTTP 500")

    with pytest.raises(UsageError, match="^-i agents:gen: the generator failed: the generator agent failed: HTTP 500$"):
        collect(stream_of(config, "count=10"), broken)

    async def tires(request: RoleRequest) -> list[Any]:
        if request.metadata["batch_number"] > 2:
            raise RoleError("rate limited for good")
        return numbered(request)

    stream = stream_of(config, "count=100&batch=5")
    stream.parallel = 1
    cases = collect(stream, tires)
    assert len(cases) == 10  # the cases generated before the failure still run
    assert stream.stats.stop_reason == "generated 10 of the 100 cases asked: the generator failed 2 batches in a row: rate limited for good"
    assert stream.stats.batches == 4 and stream.stats.problems == []  # two failed alike: the next would too; said once, in the stop reason


def test_a_row_of_failed_batches_that_a_good_one_ends_is_one_problem_line(config):
    async def hiccup(request: RoleRequest) -> list[Any]:
        if request.metadata["batch_number"] in (2, 4):
            raise RoleError(f"overloaded at batch {request.metadata['batch_number']}")
        return numbered(request)

    stream = stream_of(config, "count=15&batch=5")
    stream.parallel = 1
    assert len(collect(stream, hiccup)) == 15  # two failures, not alike: generation goes on
    assert stream.stats.problems == ["agents:gen batch 2: the generator failed: overloaded at batch 2", "agents:gen batch 4: the generator failed: overloaded at batch 4"]


def test_generated_jsonl_is_a_suite_and_a_resumed_stream_generates_only_what_is_missing(config, tmp_path: Path):
    run_dir = tmp_path / "run"
    first = stream_of(config, "count=30&batch=10")
    first.parallel = 1
    assert first.open(run_dir) == []

    async def some() -> None:  # interrupted after the first batch
        async for _ in first.batches(Writer(numbered)):
            break

    from farm.aio import run_sync

    run_sync(some())
    lines = (run_dir / GENERATED_JSONL).read_text().splitlines()
    assert len(lines) == 10
    with open(run_dir / GENERATED_JSONL, "a") as file:
        file.write('{"id": "torn", "inp')  # a line a crash cut short was never accepted

    again = stream_of(config, "count=30&batch=10")
    resumed = again.open(run_dir)
    assert [c.id for c in resumed] == [json.loads(line)["id"] for line in lines]
    assert again.stats.kept == 10
    writer = Writer(numbered)  # writes batch 1's cases again too: they are not generated twice
    new = collect(again, writer)
    assert len(new) == 20
    final = [json.loads(line) for line in (run_dir / GENERATED_JSONL).read_text().splitlines()]
    assert final[:10] == [json.loads(line) for line in lines]
    assert len(final) == 30 and len({c["input"] for c in final}) == 30 and len({c["id"] for c in final}) == 30
    assert again.stats.duplicates == 0  # what the earlier part wrote is not counted as the generator's repeat
    suite = resolve_input(str(run_dir / GENERATED_JSONL), config, None)
    assert len(suite.cases) == 30 and not suite.problems


def test_a_finished_generation_is_cached_whole_and_read_back_without_a_generator_call(config, tmp_path: Path):
    cache = RoleCache(tmp_path / "cache")
    first = stream_of(config, "count=25&batch=10&focus=a,b", cache=cache)
    first.open(tmp_path / "one")
    writer = Writer(lambda r: [{"id": f"x{i}", "input": f"{r.metadata['focus']} {r.metadata['batch_number']} {i} {len(r.metadata['avoid'])}"} for i in range(r.metadata["count"])])
    made = collect(first, writer)
    calls = len(writer.requests)

    again = stream_of(config, "count=25&batch=10&focus=a,b", cache=cache)
    again.open(tmp_path / "two")
    read = collect(again, writer)
    assert len(writer.requests) == calls  # no generator call
    assert [c.id for c in read] == [c.id for c in made]
    assert again.stats.cached and again.stats.calls == 0 and again.stats.kept == 25
    assert (tmp_path / "two" / GENERATED_JSONL).read_text() == (tmp_path / "one" / GENERATED_JSONL).read_text()

    other_seed = stream_of(config, "count=25&batch=10&focus=a,b&seed=3", cache=cache)
    collect(other_seed, writer)
    assert len(writer.requests) > calls  # another seed, another suite
    no_cache = stream_of(config, "count=25&batch=10&focus=a,b", cache=None)
    before = len(writer.requests)
    collect(no_cache, writer)
    assert len(writer.requests) > before
    sampling = resolve_input("agents:hot?count=5", config, "target", cache=cache).feed.stream
    assert sampling is not None and sampling._whole_key() is None  # a generator that samples is not cached


SCRIPTS = '''
import asyncio

def yields(meta):
    for i in range(meta["count"] + 5):
        if i == 3:
            yield [{"id": "pair-a", "input": "pair a"}, {"id": "pair-b", "input": "pair b"}]
        elif i == 4:
            yield {"id": "dup", "input": "one 0"}
        else:
            yield {"id": f"one-{i}", "input": f"one {i}"}
    raise AssertionError("read past count")

async def yields_async(meta):
    for i in range(meta["count"]):
        await asyncio.sleep(0)
        yield {"id": "same", "input": f"async {i}", "tags": ["mine"]}

def plain(meta):
    return {"cases": [{"id": "p1", "input": "plain"}]}

def forever(meta):
    while True:
        yield {"id": "same", "input": "the same"}

def broken_later(meta):
    yield {"id": "ok", "input": "fine"}
    raise RuntimeError("out of ideas")
'''


def test_script_generators_stream_generator_and_async_generator_functions(config, tmp_path: Path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gens.py").write_text(SCRIPTS)

    def script_stream(ref: str) -> CaseStream:
        stream = resolve_input(f"scripts:{ref}", config, "target").feed.stream
        assert stream is not None
        return stream

    async def unused(request: RoleRequest) -> list[Any]:
        raise AssertionError("a script stream calls no generator agent")

    stream = script_stream("gens.yields?count=6")
    cases = collect(stream, unused)
    assert [c.id for c in cases] == ["one-0", "one-1", "one-2", "pair-a", "pair-b", "one-5"]
    assert stream.stats.duplicates == 1 and stream.stats.batches == 6

    stream = script_stream("gens.yields_async?count=3")
    cases = [c.materialized() for c in collect(stream, unused)]
    assert [c.id for c in cases] == ["same", "same-2", "same-3"] and cases[0].case.tags == ["mine"]

    assert [c.id for c in collect(script_stream("gens.plain?count=4"), unused)] == ["p1"]

    stream = script_stream("gens.forever?count=10")
    assert [c.id for c in collect(stream, unused)] == ["same"]  # it ends
    assert stream.stats.stop_reason == "generated 1 of the 10 cases asked: the last 100 cases the script yielded added no new valid case"

    stream = script_stream("gens.broken_later?count=4")
    assert [c.id for c in collect(stream, unused)] == ["ok"]
    assert stream.stats.stop_reason == "generated 1 of the 4 cases asked: the generator script failed: RuntimeError: out of ideas"


def test_a_run_whose_generator_writes_no_valid_case_is_one_sentence_and_runs_nothing(config, tmp_path: Path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "bad.py").write_text("def main(meta):\n    return [{'id': 'x', 'input': 'y', 'assertions': [{'type': 'nope'}]}]\n")
    import farm

    with pytest.raises(UsageError, match=r"^-i scripts:bad: no case to run: generated 0 of the 3 cases asked: the generator wrote no more$"):
        farm.run("scripts:bad?count=3", config=config, agent="target", dry_run=True, quiet=True)
