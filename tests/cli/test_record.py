"""The run's record is true: a turn's ``retries`` count the requests really sent,
a reply cut at the token limit is marked, and ``run.json`` after a resume keeps the first
part's start and command and lists every part; on both engines, against an OpenAI-compatible
agent behind a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.results import format_usd
from tests.scripted import farm_toml


class Record:
    """An agent picked by the last user message:

    - ``500 twice <tag>``: the first two requests with this text get 500, the next ones "recovered";
    - ``always 500``: every request gets 500;
    - ``cut``: a reply cut at the token limit (``finish_reason: "length"``);
    - anything else: "hello".
    """

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        text = body["messages"][-1]["content"]
        with self._lock:
            self.seen[text] += 1
            count = self.seen[text]
        if text == "always 500" or (text.startswith("500 twice") and count <= 2):
            return Response({"error": {"message": "boom"}}, status=500)
        if text == "cut":
            reply = chat_completion("The expense policy says that")
            reply["choices"][0]["finish_reason"] = "length"
            return Response(reply)
        return Response(chat_completion("recovered" if text.startswith("500 twice") else "hello"))


@pytest.fixture(scope="module")
def server():
    agent = Record()
    with JSONServer(agent) as server:
        yield server, agent


@pytest.fixture
def project(tmp_path: Path, server, engine: str) -> Path:
    (tmp_path / "farm.toml").write_text(farm_toml(server[0].url, engine=engine))  # max_retries = 2
    return tmp_path


def view_json(results: Path, path: str) -> Any:
    """``GET path`` of ``farm view`` serving ``results``, over HTTP on 127.0.0.1."""
    from farm.view import ViewApp, ViewServer

    server = ViewServer(ViewApp(str(results)))
    server.start()
    try:
        with urllib.request.urlopen(f"http://{server.server_address[0]}:{server.server_address[1]}{path}", timeout=30) as response:
            return json.load(response)
    finally:
        server.shutdown()
        server.server_close()


def run(project: Path, cases: list[dict], **options: Any) -> tuple[farm.RunResult, dict[str, dict]]:
    suite = project / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    result = farm.run(str(suite), config=project / "farm.toml", quiet=True, **options)
    rows = [json.loads(line) for line in (result.run_dir / "results.jsonl").read_text().splitlines()]
    return result, {r["id"]: r for r in rows}


def test_a_turn_records_the_requests_it_repeated_whether_it_got_a_reply_or_not(project: Path, server):
    tag = f"500 twice {project.name}"
    result, rows = run(project, [{"id": "flaky", "input": tag}, {"id": "down", "input": "always 500"}])
    assert server[1].seen[tag] == 3
    assert rows["flaky"]["status"] == "passed" and rows["flaky"]["turns"][0]["retries"] == 2
    assert rows["down"]["status"] == "error" and "after 3 requests" in rows["down"]["error"]
    assert rows["down"]["turns"][0]["retries"] == 2  # three requests sent: two of them repeats
    turns = {r["case_id"]: r for r in pq.read_table(result.run_dir / "turns.parquet").to_pylist()}
    assert turns["flaky"]["retries"] == turns["down"]["retries"] == 2


PRICE = {"input": 1000.0, "output": 2000.0}  # USD per million tokens: $0.02 a reply of 10 + 5 tokens
PER_REPLY = (10 * PRICE["input"] + 5 * PRICE["output"]) / 1e6


class Generator:
    """A priced generator that fails once (500), then answers no JSON, then writes the cases;
    ``empty`` makes it write none, ever; ``failing``: its first case fails its assertion."""

    def __init__(self, empty: bool = False, failing: bool = False) -> None:
        self.requests = 0
        self.empty = empty
        self.failing = failing
        self._lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        import re

        with self._lock:
            self.requests += 1
            number = self.requests
        if self.empty:
            return Response(chat_completion(json.dumps({"cases": []})))
        if number == 1:
            return Response({"error": {"message": "overloaded"}}, status=500)
        if number == 2:
            return Response(chat_completion("Here are some ideas for test cases!"))
        count = int(re.search(r"Generate (\d+) test cases", body["messages"][0]["content"]).group(1))
        cases = [{"id": f"g{i}", "input": f"Hello {i}"} for i in range(count)]
        if self.failing:
            cases[0]["assertions"] = [{"type": "contains", "value": "goodbye"}]
        return Response(chat_completion(json.dumps({"cases": cases})))


def generator_project(project: Path, generator: Generator) -> JSONServer:
    server = JSONServer(generator).start()
    with (project / "farm.toml").open("a") as toml:
        toml.write(
            f"""
[connectors.llm]
base_url = "{server.url}/v1"
model = "gen"
max_concurrency = 1
max_retries = 2
price = {{ input = {PRICE["input"]}, output = {PRICE["output"]} }}

[agents.gen]
kind = "generator"
connector = "llm"
"""
        )
    return server


def test_the_generation_and_the_reporter_count_every_request_they_sent_and_what_they_cost(project: Path, server):
    generator = Generator()
    llm = generator_project(project, generator)
    with (project / "farm.toml").open("a") as toml:  # a priced reporter on the agent's server, which says "hello"
        toml.write(
            f"""
[connectors.rep]
base_url = "{server[0].url}/v1"
model = "rep"
price = {{ input = {PRICE["input"]}, output = {PRICE["output"]} }}

[agents.rep]
kind = "reporter"
connector = "rep"
"""
        )
    try:
        result = CliRunner().invoke(app, ["test", "-i", "agents:gen?count=3", "--reporter", "rep", "--no-cache", "--config", str(project / "farm.toml")])
    finally:
        llm.stop()
    assert result.exit_code == 0, result.output
    (run_dir,) = [p.parent for p in (project / "results").glob("*/run.json")]
    info = json.loads((run_dir / "run.json").read_text())
    assert generator.requests == 3  # a 500, an answer with no JSON, the cases
    assert info["generation"]["calls"] == 3 and info["generation"]["kept"] == 3
    assert "(3 generator calls)" in result.output
    # the generator's two replies (the 500 cost nothing), in the summary; the reporter's, after it, in run.json
    assert f"{format_usd(2 * PER_REPLY)} simulator, judge and generator" in result.output
    assert info["cost"]["role_cost_usd"] == pytest.approx(3 * PER_REPLY)
    assert (run_dir / "report.md").read_text() == "hello"


def test_a_resumed_generated_run_keeps_what_its_generation_sent_and_cost(project: Path):
    generator = Generator(failing=True)
    llm = generator_project(project, generator)
    config = str(project / "farm.toml")
    try:  # the first generated case fails and --fail-fast stops the run there; the resume runs the rest
        first = farm.run("agents:gen?count=3", config=config, cache=False, fail_fast=True, parallel=1, quiet=True)
        assert first.summary.total == 1 and generator.requests == 3
        again = farm.run(resume=first.run_dir, quiet=True)
    finally:
        llm.stop()
    assert again.summary.total == 3 and generator.requests == 3  # the cases were read back from generated.jsonl
    info = json.loads((first.run_dir / "run.json").read_text())
    assert info["counts"]["total"] == 3 and len(info["parts"]) == 2
    assert info["generation"]["calls"] == 3 and info["generation"]["cost_usd"] == pytest.approx(2 * PER_REPLY)
    assert info["cost"]["role_cost_usd"] == pytest.approx(2 * PER_REPLY)  # the first part's generation, kept


def test_a_generation_that_wrote_no_case_exits_2_and_leaves_no_run_folder(project: Path):
    server = generator_project(project, Generator(empty=True))
    try:
        result = CliRunner().invoke(app, ["test", "-i", "agents:gen?count=3", "--no-cache", "--config", str(project / "farm.toml")])
    finally:
        server.stop()
    assert result.exit_code == 2, result.output
    assert "no case to run" in result.output
    assert not list((project / "results").glob("*/run.json"))  # no run left marked finished, or at all


@pytest.fixture
def priced(tmp_path: Path, server) -> Path:
    """A project whose agent's connector has a price and whose farm.toml names no engine."""
    (tmp_path / "farm.toml").write_text(
        f"""
[farm]
default_agent = "bot"
results_dir = "results"

[connectors.priced]
base_url = "{server[0].url}/v1"
model = "m"
price = {{ input = {PRICE["input"]}, output = {PRICE["output"]} }}

[agents.bot]
kind = "openai"
connector = "priced"
"""
    )
    cases = [{"id": f"c{i:02d}", "input": f"case {i}"} for i in range(12)]
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return tmp_path


def test_a_resumed_run_keeps_its_first_start_and_command_lists_its_parts_and_goes_on_on_its_engine(priced: Path, engine: str):
    from rich.console import Console

    printed = io.StringIO()
    first = farm.run(
        str(priced / "suite.jsonl"),
        config=priced / "farm.toml",
        engine=engine,  # given once, on the command line
        parallel=1,
        max_cost=3 * PER_REPLY,  # stops early: resumed with a larger budget below
        command=["farm", "test", "--engine", engine],
        console=Console(file=printed, width=400),
    )
    assert first.exit_code == 1 and first.engine == engine
    assert f"resume with: farm test --resume {first.run_dir}" in printed.getvalue()
    assert ("--engine ray" in printed.getvalue()) is (engine == "ray")  # the local engine is the default
    time.sleep(0.3)  # a pause between the parts, which is no part of the run's wall time

    again = farm.run(resume=first.run_dir, max_cost=10, command=["farm", "test", "--resume", "it"], quiet=True)
    assert again.exit_code == 0 and again.engine == engine  # the run's own engine, without --engine
    info = json.loads((first.run_dir / "run.json").read_text())
    parts = info["parts"]
    assert [p["engine"] for p in parts] == [engine, engine] and info["engine"] == engine
    assert [p["command"] for p in parts] == [["farm", "test", "--engine", engine], ["farm", "test", "--resume", "it"]]
    assert info["command"] == parts[0]["command"] and info["started_at"] == parts[0]["started_at"]
    assert info["ended_at"] == parts[1]["ended_at"] and parts[0]["ended_at"] + 0.3 <= parts[1]["started_at"]
    assert info["wall_seconds"] == pytest.approx(sum(p["ended_at"] - p["started_at"] for p in parts))
    assert info["wall_seconds"] < info["ended_at"] - info["started_at"] - 0.3
    assert info["counts"]["total"] == 12 and again.summary.wall_seconds == pytest.approx(info["wall_seconds"])
    [shown] = view_json(priced / "results", "/api/runs")["runs"]
    assert shown["started_at"] == parts[0]["started_at"] and shown["wall_s"] == pytest.approx(info["wall_seconds"])


def test_a_reply_cut_at_the_token_limit_is_marked_on_its_turn_said_on_the_console_and_in_the_viewer(project: Path):
    from rich.console import Console

    printed = io.StringIO()
    cases = [
        {"id": "cut", "input": "cut", "assertions": [{"type": "contains", "value": "policy"}]},  # passes on half an answer
        {"id": "whole", "input": "hi", "assertions": [{"type": "contains", "value": "hello"}]},
    ]
    suite = project / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    result = farm.run(str(suite), config=project / "farm.toml", console=Console(file=printed, width=400))
    assert result.exit_code == 0
    rows = {r["id"]: r for r in map(json.loads, (result.run_dir / "results.jsonl").read_text().splitlines())}
    assert rows["cut"]["status"] == "passed" and rows["cut"]["turns"][0]["truncated"] is True
    assert rows["whole"]["turns"][0]["truncated"] is False
    turns = {r["case_id"]: r for r in pq.read_table(result.run_dir / "turns.parquet").to_pylist()}
    assert turns["cut"]["truncated"] is True and turns["whole"]["truncated"] is False
    [cut_line] = [line for line in printed.getvalue().splitlines() if "[cut]" in line]
    assert "turn 1: the reply was cut at the model's token limit (finish_reason: length)" in cut_line
    assert "token limit" not in next(line for line in printed.getvalue().splitlines() if "[whole]" in line)

    rescored = farm.rescore(result.run_dir, quiet=True)  # the recorded reply is replayed, cut as it was
    again = {r["id"]: r for r in map(json.loads, (rescored.run_dir / "results.jsonl").read_text().splitlines())}
    assert again["cut"]["turns"][0]["truncated"] is True and again["whole"]["turns"][0]["truncated"] is False
    for case, cut in (("cut", True), ("whole", False)):
        detail = view_json(project / "results", f"/api/runs/{result.run_dir.name}/cases/{case}")
        assert detail["repetitions"][0]["turns"][0]["truncated"] is cut


def test_a_part_whose_process_was_killed_ends_when_it_last_wrote_a_result(priced: Path):
    first = farm.run(str(priced / "suite.jsonl"), config=priced / "farm.toml", engine="local", parallel=1, max_cost=3 * PER_REPLY, quiet=True)
    run_json = first.run_dir / "run.json"
    info = json.loads(run_json.read_text())
    started = info["started_at"] = info["parts"][0]["started_at"] = info["parts"][0]["started_at"] - 10  # a longer part
    del info["parts"][0]["ended_at"], info["ended_at"]  # as a kill -9 leaves it: no end written
    info["status"] = "running"
    run_json.write_text(json.dumps(info))
    os.utime(first.run_dir / "results.jsonl", (started + 1.5, started + 1.5))  # its last result

    again = farm.run(resume=first.run_dir, max_cost=10, quiet=True)
    assert again.exit_code == 0
    info = json.loads(run_json.read_text())
    killed, resumed = info["parts"]
    assert killed["ended_at"] == pytest.approx(started + 1.5)
    assert info["wall_seconds"] == pytest.approx(1.5 + resumed["ended_at"] - resumed["started_at"])
