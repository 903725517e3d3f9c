"""Generation end to end: a generator that behaves like an LLM, behind a real HTTP server on 127.0.0.1.

The generator (``farm.demo.generator.LikeAnLLM``) writes at most 25 cases a reply, the same
cases for the same prompt, one in 20 malformed, with ids that start again in every reply; the
agent under test is the scripted expense agent. The runs go on both engines.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.generator import LikeAnLLM
from farm.demo.server import JSONServer, Response, chat_completion
from tests.scripted import ScriptedAgent, farm_toml

ROOT = Path(__file__).resolve().parents[2]


def generator_toml(url: str, concurrency: int = 8) -> str:
    return f"""
[connectors.llm]
base_url = "{url}/v1"
model = "like-an-llm"
max_concurrency = {concurrency}
timeout = "30s"

[agents.gen]
kind = "generator"
connector = "llm"
"""


@pytest.fixture(scope="module")
def agent():
    with JSONServer(ScriptedAgent()) as server:
        yield server


def project(tmp_path: Path, agent_url: str, llm: LikeAnLLM, engine: str | None = None, concurrency: int = 8):
    server = JSONServer(llm).start()
    (tmp_path / "farm.toml").write_text(farm_toml(agent_url, engine=engine) + generator_toml(server.url, concurrency))
    return server


def farm_test(tmp_path: Path, *args: str):
    return CliRunner().invoke(app, ["test", *args, "--config", str(tmp_path / "farm.toml")], catch_exceptions=False)


def run_dirs(tmp_path: Path) -> list[Path]:
    return sorted(p.parent for p in (tmp_path / "results").glob("*/run.json"))


def release_once_a_case_ended(tmp_path: Path, llm: LikeAnLLM, seconds: float = 120.0) -> None:
    """Let ``llm`` answer again once a run under ``tmp_path`` wrote a result (a bound, not a timing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not any(p.stat().st_size for p in (tmp_path / "results").glob("*/results.jsonl")):
        time.sleep(0.05)
    llm.release()


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_count_runs_exactly_that_many_distinct_generated_cases_and_again_without_a_generator_call(tmp_path: Path, agent, engine: str):
    count = 200 if engine == "local" else 120
    # the generator answers three batches, then holds its answers until a case has ended: the cases
    # run while generation goes on (however long the session actors and role pools take to start)
    llm = LikeAnLLM(latency=0.1, answer_first=3)
    threading.Thread(target=release_once_a_case_ended, args=(tmp_path, llm), daemon=True).start()
    server = project(tmp_path, agent.url, llm, engine=engine, concurrency=2 if engine == "local" else 1)
    try:
        result = farm_test(tmp_path, "-i", f"agents:gen?count={count}")
        assert result.exit_code == 0, result.output
        (run_dir,) = run_dirs(tmp_path)
        results = lines(run_dir / "results.jsonl")
        generated = lines(run_dir / "generated.jsonl")
        assert len(results) == count and len({r["id"] for r in results}) == count
        assert {r["id"] for r in results} == {c["id"] for c in generated}  # the run's cases, all generated
        assert len({c["input"] for c in generated}) == count
        assert all(r["status"] == "passed" for r in results)  # no generator mistake became a result
        info = json.loads((run_dir / "run.json").read_text())
        stats = info["generation"]
        assert stats["asked"] == stats["kept"] == count and stats["stop_reason"] is None
        assert stats["malformed"] > 0 and stats["renamed"] > 0 and stats["calls"] >= llm.requests >= stats["batches"]  # a request cancelled once enough cases came may not reach the server
        assert stats["batches"] >= count / 20
        assert stats["problems"][0].startswith("agents:gen batch ") and "field 'assertions[0].type': unknown assertion type 'tool_caled' (did you mean 'tool_called'?)" in stats["problems"][0]
        assert info["role_cache"]["role_calls"] >= stats["batches"]  # the generator's calls count as role calls
        assert "Traceback" not in result.output
        first_result = min(r["started_at"] + r["duration_ms"] / 1000 for r in results)
        assert first_result < llm.last_request, "no case ran before generation ended"

        requests = llm.requests
        again = farm_test(tmp_path, "-i", f"agents:gen?count={count}")
        assert again.exit_code == 0, again.output
        assert llm.requests == requests, "the same command sent a generator request again"
        second = next(p for p in run_dirs(tmp_path) if p != run_dir)
        assert [c["id"] for c in lines(second / "generated.jsonl")] == [c["id"] for c in generated]
        assert {r["id"] for r in lines(second / "results.jsonl")} == {r["id"] for r in results}
        assert json.loads((second / "run.json").read_text())["generation"]["cached"] is True

        if engine == "local":  # the cache is the driver's, the same on both engines: once is enough
            fresh = farm_test(tmp_path, "-i", f"agents:gen?count={count}", "--no-cache")
            assert fresh.exit_code == 0 and llm.requests > requests  # --no-cache generates anew
    finally:
        server.stop()


def test_a_generator_with_few_distinct_cases_ends_with_what_it_has_and_says_why(tmp_path: Path, agent):
    llm = LikeAnLLM(distinct=300, latency=0.02)
    server = project(tmp_path, agent.url, llm, engine="local")
    try:
        started = time.monotonic()
        result = farm_test(tmp_path, "-i", "agents:gen?count=1000")
        assert time.monotonic() - started < 120
        assert result.exit_code == 0, result.output
        (run_dir,) = run_dirs(tmp_path)
        kept = len(lines(run_dir / "results.jsonl"))
        assert 250 <= kept <= 300 * 19 // 20 + 1  # the malformed ones never count
        stats = json.loads((run_dir / "run.json").read_text())["generation"]
        assert stats["kept"] == kept and stats["duplicates"] > 0
        sentence = f"generated {kept} of the 1000 cases asked: the last 5 batches"
        assert stats["stop_reason"].startswith(sentence)
        assert sentence in " ".join(result.output.split())
    finally:
        server.stop()


def test_coverage_lists_tag_every_case_and_dry_run_writes_the_generated_suite(tmp_path: Path, agent):
    llm = LikeAnLLM(latency=0.0)
    server = project(tmp_path, agent.url, llm)
    out = tmp_path / "suite.jsonl"
    try:
        result = farm_test(tmp_path, "-i", "agents:gen?count=40&batch=10&focus=refunds,travel&complexity=low,high", "--dry-run", "-o", str(out))
        assert result.exit_code == 0, result.output
        cases = lines(out)
        assert len(cases) == 40
        slices: dict[tuple[str, ...], int] = {}
        for case in cases:
            key = tuple(sorted(case["tags"]))
            slices[key] = slices.get(key, 0) + 1
        assert slices == {(f"complexity:{c}", f"focus:{f}"): 10 for f in ("refunds", "travel") for c in ("low", "high")}
        for case in cases:  # the prompt asked each batch for its slice (the writer echoes it in the name)
            tags = dict(tag.split(":") for tag in case["tags"])
            assert json.loads(case["name"][case["name"].index("(") + 1 : -1]) == tags
        rerun = farm_test(tmp_path, "-i", str(out))  # a valid suite
        assert rerun.exit_code == 0, rerun.output
    finally:
        server.stop()


def test_an_interrupted_generation_resumes_with_the_same_cases_and_generates_only_what_is_missing(tmp_path: Path, agent):
    llm = LikeAnLLM(latency=0.05, answer_first=4)  # four batches' cases, then the generation hangs until released
    server = project(tmp_path, agent.url, llm, engine="local", concurrency=2)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "farm.cli", "test", "--config", str(tmp_path / "farm.toml")]
    try:
        proc = subprocess.Popen([*command, "-i", "agents:gen?count=300"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                files = list((tmp_path / "results").glob("*/generated.jsonl"))
                if files and len(files[0].read_text().splitlines()) >= 60 and llm.requests > 4:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            llm.release()  # the calls it holds answer now, as a model's would in time
            output, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, output
        (run_dir,) = run_dirs(tmp_path)
        before = (run_dir / "generated.jsonl").read_text().splitlines()
        assert 60 <= len(before) < 300, output
        assert f"resume with: farm test --resume {run_dir}" in " ".join(output.split()).lower()
        ran_before = {r["id"] for r in lines(run_dir / "results.jsonl")} if (run_dir / "results.jsonl").exists() else set()
        assert ran_before <= {json.loads(line)["id"] for line in before}
        requests = llm.requests

        resumed = subprocess.run([*command, "--resume", str(run_dir)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        after = (run_dir / "generated.jsonl").read_text().splitlines()
        assert after[: len(before)] == before, "the cases generated before the interrupt changed"
        cases = [json.loads(line) for line in after]
        assert len(cases) == 300 and len({c["id"] for c in cases}) == 300 and len({c["input"] for c in cases}) == 300
        results = lines(run_dir / "results.jsonl")
        assert sorted(r["id"] for r in results) == sorted(c["id"] for c in cases)  # each case once
        asked_again = llm.requests - requests
        assert asked_again <= (300 - len(before)) / 19 + 4, f"{asked_again} generator calls for {300 - len(before)} missing cases"

        rescored = CliRunner().invoke(app, ["rescore", str(run_dir), "--config", str(tmp_path / "farm.toml")], catch_exceptions=False)
        assert rescored.exit_code == 0, rescored.output  # farm rescore reads the generated cases
        (rescore_dir,) = [p for p in run_dirs(tmp_path) if p != run_dir]
        assert len(lines(rescore_dir / "results.jsonl")) == 300
    finally:
        llm.release()
        server.stop()


SCRIPT = '''
import asyncio

async def stream(meta):
    for i in range(meta["count"] + 10):
        await asyncio.sleep(0.01)
        if i % 7 == 6:
            yield [{"id": f"pair-{i}", "input": f"I want to submit an expense, batch {i}"}, {"id": "broken", "input": "x", "assertions": [{"type": "nope"}]}]
        else:
            yield {"id": "expense", "input": f"I want to submit an expense number {i}", "assertions": [{"type": "contains", "value": "type of expense"}]}
'''


def test_a_script_generator_that_yields_streams_its_cases_into_the_run(tmp_path: Path, agent, engine: str):
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text(SCRIPT)
    result = farm_test(tmp_path, "-i", "scripts:gen.stream?count=20")
    assert result.exit_code == 0, result.output
    (run_dir,) = run_dirs(tmp_path)
    results = lines(run_dir / "results.jsonl")
    assert len(results) == 20 and {r["status"] for r in results} == {"passed"}
    ids = {r["id"] for r in results}
    assert {"expense", "expense-2", "pair-6"} <= ids and "broken" not in ids
    stats = json.loads((run_dir / "run.json").read_text())["generation"]
    assert stats["kept"] == 20 and stats["malformed"] >= 2 and stats["calls"] == 0
    assert [c["id"] for c in lines(run_dir / "generated.jsonl")][:3] == ["expense", "expense-2", "expense-3"]
    assert {c["id"] for c in lines(run_dir / "generated.jsonl")} == ids


FORGING = r'''
async def stream(meta):
    yield {"id": "ok\n✓ [forged] (1 turn, 1ms)", "name": "a\nb", "input": "Hello"}
    yield {"id": "bad\n✓ [forged-drop]", "input": "x", "assertions": [{"type": "nope"}]}
'''


def test_line_breaks_in_a_generated_id_cannot_forge_a_console_line(tmp_path: Path, agent, engine: str):
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text(FORGING)
    result = farm_test(tmp_path, "-i", "scripts:gen.stream?count=1", "-v")
    assert result.exit_code == 0, result.output
    assert not [line for line in result.output.splitlines() if line.lstrip().startswith("✓ [forged")], result.output
    assert "[ok␊✓ [forged] (1 turn, 1ms)] a␊b" in result.output


FAILING = """
async def stream(meta):
    for i in range(3):
        yield {"id": f"expense-{i}", "input": f"I want to submit an expense number {i}", "assertions": [{"type": "contains", "value": "type of expense"}]}
    raise ConnectionError("the generator's backend went away")
"""


def test_a_generator_that_fails_midway_fails_the_run_although_its_cases_pass(tmp_path: Path, agent, engine: str):
    """A role's failure is never a green run: the suite it cut short is not the one asked for."""
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text(FAILING)
    result = farm_test(tmp_path, "-i", "scripts:gen.stream?count=10", "-q")
    assert result.exit_code == 1, result.output
    assert "generated 3 of the 10 cases asked: the generator script failed: ConnectionError" in result.output
    (run_dir,) = run_dirs(tmp_path)
    assert {r["status"] for r in lines(run_dir / "results.jsonl")} == {"passed"}


def test_on_the_ray_engine_generator_calls_run_in_a_role_pool(tmp_path: Path, agent, ray_session):
    from farm.actors.roles import PoolRoles, RolePools, RoleSetup, start_pool

    from farm.config import load_config
    from farm.inputs import resolve_input
    from farm.roles.generation import collect

    llm = LikeAnLLM(latency=0.05)
    server = project(tmp_path, agent.url, llm)
    try:
        config = load_config(tmp_path / "farm.toml")
        setup = RoleSetup("gen-pool-test", config)
        pool = start_pool(["gen-pool-test-0", "gen-pool-test-1"], setup)
        try:
            roles = PoolRoles(RolePools(generators=list(pool), setup=setup))
            stream = resolve_input("agents:gen?count=120", config, "target").feed.stream
            assert stream is not None
            cases = collect(stream, roles.generate)
            assert len(cases) == 120 and len({c.id for c in cases}) == 120
            # answered batches went through the pool; a request still in flight at the 120th case counts as a call
            assert llm.requests >= stream.stats.batches >= 6 and stream.stats.calls >= stream.stats.batches
        finally:
            for handle in pool.values():
                ray_session.kill(handle)
    finally:
        server.stop()


class Recording(LikeAnLLM):
    """:class:`LikeAnLLM` that keeps the messages of every request it was sent."""

    def __init__(self, **kwargs):
        super().__init__(latency=0.0, **kwargs)
        self.sent: list[list[dict]] = []

    def __call__(self, path, body, headers):
        self.sent.append(body.get("messages", []))
        return super().__call__(path, body, headers)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("cuont=20", "-i agents:gen: unknown parameter 'cuont' (did you mean 'count'?)"),
        ("count=0", "-i agents:gen: 'count' must be a whole number of at least 1, not 0"),
        ("count=3&tone=friendly", "-i agents:gen: unknown parameter 'tone': the generator's prompt has no {tone}"),
    ],
)
def test_a_generator_parameter_the_farm_does_not_know_is_one_sentence_before_any_call(tmp_path: Path, agent, query: str, said: str):
    llm = Recording()
    server = project(tmp_path, agent.url, llm)
    try:
        result = farm_test(tmp_path, "-i", f"agents:gen?{query}")
        assert result.exit_code == 2, result.output
        assert said in " ".join(result.output.split())
        assert "Traceback" not in result.output and llm.sent == []
        assert run_dirs(tmp_path) == []
    finally:
        server.stop()


def test_the_generator_is_asked_for_cases_not_for_a_users_first_message(tmp_path: Path, agent):
    llm = Recording()
    server = project(tmp_path, agent.url, llm)
    try:
        plain = farm_test(tmp_path, "-i", "agents:gen?count=3", "--dry-run")
        assert plain.exit_code == 0, plain.output
        system, user = llm.sent[0]
        assert user["role"] == "user" and "first message" not in user["content"] and "3 test cases" in user["content"]
        assert "covers" not in system["content"] and "{}" not in system["content"]  # no coverage lists, no empty placeholder
        assert "(none yet)" in system["content"]  # nothing to avoid in the first batch

        covered = farm_test(tmp_path, "-i", "agents:gen?count=4&batch=2&focus=refunds,travel", "--dry-run")
        assert covered.exit_code == 0, covered.output
        assert 'this batch covers: {"focus": "refunds"}.' in llm.sent[-1][0]["content"] or 'this batch covers: {"focus": "travel"}.' in llm.sent[-1][0]["content"]
    finally:
        server.stop()


def test_a_prompt_file_is_text_with_its_literal_braces_kept(tmp_path: Path, agent):
    llm = Recording()
    server = project(tmp_path, agent.url, llm)
    prompt = 'Write {count} cases about {focus} for {nobody}. Answer like {"cases": [{"id": "x", "input": "{hi}"}]} and {{this}}.'
    (tmp_path / "gen.md").write_text(prompt)
    toml = tmp_path / "farm.toml"
    toml.write_text(toml.read_text().replace('[agents.gen]\nkind = "generator"\n', '[agents.gen]\nkind = "generator"\nprompt = "gen.md"\n'))
    try:
        result = farm_test(tmp_path, "-i", "agents:gen?count=2&focus=refunds", "--dry-run")
        assert result.exit_code == 0, result.output
        system = llm.sent[0][0]["content"]
        assert system == 'Write 2 cases about refunds for {nobody}. Answer like {"cases": [{"id": "x", "input": "{hi}"}]} and {{this}}.'
    finally:
        server.stop()


def test_a_generated_case_with_more_turns_than_a_case_may_have_is_dropped(tmp_path: Path, agent):
    cases = [
        {"id": "endless", "turns": [{"input": "and again"}] * 10_001},
        {"id": "fine", "input": "I want to submit an expense", "assertions": [{"type": "contains", "value": "type of expense"}]},
    ]
    server = JSONServer(lambda path, body, headers: Response(chat_completion(json.dumps({"cases": cases})))).start()
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url) + generator_toml(server.url))
    try:
        result = farm_test(tmp_path, "-i", "agents:gen?count=2&patience=1", "--engine", "local")
        assert result.exit_code == 0, result.output
        (run_dir,) = run_dirs(tmp_path)
        assert [c["id"] for c in lines(run_dir / "generated.jsonl")] == ["fine"]
        stats = json.loads((run_dir / "run.json").read_text())["generation"]
        assert stats["malformed"] >= 1 and "field 'turns': 10001 turns, more than the 10000" in stats["problems"][0]
    finally:
        server.stop()


BIG_SCRIPT = '''
def huge(meta):
    return [{"id": "big", "input": "x" * 11_000_000}]


def many(meta):
    yield {"id": "small", "input": "I want to submit an expense", "assertions": [{"type": "contains", "value": "type of expense"}]}
    yield [{"id": f"c{i}", "input": "y" * 1000} for i in range(11_000)]
'''


def test_a_script_generators_reply_is_bounded_like_an_http_one(tmp_path: Path, agent):
    (tmp_path / "farm.toml").write_text(farm_toml(agent.url))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "gen.py").write_text(BIG_SCRIPT)
    huge = farm_test(tmp_path, "-i", "scripts:gen.huge?count=1", "--engine", "local")
    assert huge.exit_code == 2, huge.output
    assert "the generator script returned more than 10000000 bytes at once (the bound of a reply, max_reply_bytes)" in " ".join(huge.output.split())
    before = set(run_dirs(tmp_path))
    many = farm_test(tmp_path, "-i", "scripts:gen.many?count=5", "--engine", "local")
    assert many.exit_code == 1, many.output  # the case before the oversized yield runs; the generator failed: not green
    (run_dir,) = set(run_dirs(tmp_path)) - before
    assert [r["id"] for r in lines(run_dir / "results.jsonl")] == ["small"]
    assert "yielded more than 10000000 bytes" in json.loads((run_dir / "run.json").read_text())["generation"]["stop_reason"]


def test_a_generator_that_never_answers_json_stops_after_two_batches_and_says_so_once(tmp_path: Path, agent, engine: str):
    requests: list[str] = []

    def prose(path, body, headers):
        requests.append(path)
        return Response(chat_completion("Sure! Here are some great test cases for you."))

    with JSONServer(prose) as server:
        (tmp_path / "farm.toml").write_text(farm_toml(agent.url, engine=engine) + generator_toml(server.url))
        result = farm_test(tmp_path, "-i", "agents:gen?count=2")
    assert result.exit_code == 2, result.output
    assert "generated 0 of the 2 cases asked: the generator failed 2 batches in a row: the generator answered no JSON" in result.output
    assert result.output.count("answered no JSON") == 1, result.output
    assert len(requests) == 4  # two batches, each asked again once for JSON
