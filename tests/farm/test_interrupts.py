"""An interrupt at any moment of a run: every result is in the results file and counted, or in neither.

Ctrl-C (SIGINT) reaches the process between any two bytecodes of its main thread. These runs
are interrupted at many points, by the signal itself: while the k-th result is being written
(its NDJSON event on standard output, after the JSONL line and before the summary counts it),
and while the agent answers its k-th request (wherever the driver is then: waiting, settling a
case, writing). Whatever the point, the JSONL, the Parquet table, ``run.json``'s counts, the
gate, the NDJSON summary and the report must count the same cases, each once.
"""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response
from farm.interrupts import Interrupts, redeliver, uninterrupted
from farm.writers.runinfo import read_run_json
from tests.scripted import ScriptedAgent, farm_toml

CASES = 12


def interrupt() -> None:
    """What Ctrl-C does: SIGINT to this process (its main thread runs the handler)."""
    os.kill(os.getpid(), signal.SIGINT)


class InterruptingAgent:
    """The scripted agent, sending SIGINT to this process as it answers its ``k``-th request."""

    def __init__(self, k: int):
        self.k, self.requests = k, 0
        self.agent = ScriptedAgent()
        self.lock = threading.Lock()

    def __call__(self, path: str, body: Any, headers: dict[str, str]) -> Response:
        with self.lock:
            self.requests += 1
            if self.requests == self.k:
                interrupt()
        return self.agent(path, body, headers)


class InterruptingStdout(io.StringIO):
    """Standard output that sends SIGINT as the ``k``-th ``case_result`` event is printed."""

    def __init__(self, k: int):
        super().__init__()
        self.k, self.results = k, 0

    def write(self, text: str) -> int:
        if '"event": "case_result"' in text:
            self.results += 1
            if self.results == self.k:
                interrupt()
        return super().write(text)


@pytest.fixture
def main_thread() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a run sets its signal handlers in the main thread only")


def run_interrupted(project: Path, engine: str, url: str, stdout: io.StringIO) -> tuple[farm.RunResult, str]:
    (project / "farm.toml").write_text(farm_toml(url, engine=engine))
    suite = project / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "input": f"Hello {i}"}) + "\n" for i in range(CASES)))
    run = farm.run(str(suite), config=project / "farm.toml", parallel=3, json_events=True, quiet=True)
    return run, stdout.getvalue()


def assert_counted_alike(run: farm.RunResult, events: str) -> None:
    import pyarrow.parquet as pq

    assert run.exit_code == 130  # interrupted
    written = [json.loads(line)["id"] for line in run.results.read_text().splitlines()]
    assert len(written) == len(set(written)), f"a case written twice: {written}"
    assert sorted(pq.read_table(run.run_dir / "cases.parquet").column("case_id").to_pylist()) == sorted(written)
    info = read_run_json(run.run_dir)
    assert info.counts is not None and info.counts["total"] == len(written)
    assert info.gate is not None and (info.gate.stopped, info.gate.not_run) == ("interrupted", CASES - len(written))
    summary = next(json.loads(line) for line in events.splitlines() if '"event": "summary"' in line)
    assert summary["counts"]["total"] == len(written)
    if written:  # (a report needs a result)
        report = json.loads(CliRunner().invoke(app, ["report", "--json", str(run.run_dir)]).output)
        assert report["runs"][0]["not_run"] == CASES - len(written)


@pytest.mark.parametrize("k", [1, 4])
def test_an_interrupt_while_a_result_is_written_leaves_it_written_and_counted(tmp_path: Path, engine: str, k: int, main_thread, monkeypatch):
    stdout = InterruptingStdout(k)
    monkeypatch.setattr("sys.stdout", stdout)
    with JSONServer(ScriptedAgent()) as agent:
        run, events = run_interrupted(tmp_path, engine, agent.url, stdout)
    assert_counted_alike(run, events)
    assert len(run.results.read_text().splitlines()) >= k  # the k-th, whose writing the interrupt fell into, too


@pytest.mark.parametrize("k", [2, 6])
def test_an_interrupt_while_the_agent_answers_leaves_every_result_written_and_counted(tmp_path: Path, engine: str, k: int, main_thread, monkeypatch):
    stdout = io.StringIO()
    monkeypatch.setattr("sys.stdout", stdout)
    with JSONServer(InterruptingAgent(k)) as agent:
        run, events = run_interrupted(tmp_path, engine, agent.url, stdout)
    assert_counted_alike(run, events)


def test_an_interrupt_during_an_uninterrupted_step_comes_as_it_ends(main_thread):
    steps: list[str] = []
    with Interrupts(), pytest.raises(KeyboardInterrupt):
        with uninterrupted():
            with uninterrupted():  # nested: the outermost step's end raises it
                interrupt()
                steps.append("inner ended")
            steps.append("outer ended")
        steps.append("after")  # never: the interrupt came as the step ended
    assert steps == ["inner ended", "outer ended"]


class _Watched:
    pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # Python's "Exception ignored"
def test_an_interrupt_python_swallows_where_it_lands_comes_again_where_the_run_loops(main_thread):
    with Interrupts() as interrupts:
        watched = _Watched()
        # a weakref callback: Python prints "Exception ignored" for what it raises and goes on
        ref = weakref.ref(watched, lambda _: interrupt())
        del watched  # the interrupt lands in the callback and is lost: this test goes on
        assert ref() is None and interrupts.fired
        with pytest.raises(KeyboardInterrupt):
            redeliver()
        with pytest.raises(KeyboardInterrupt):  # until the run takes it
            redeliver()
        interrupts.take()
        redeliver()  # taken: the run's clean-up goes on uncut
    redeliver()  # and no later run inherits it


def test_an_interrupt_the_run_took_at_once_is_not_raised_again(main_thread):
    with Interrupts() as interrupts:
        with pytest.raises(KeyboardInterrupt):
            interrupt()
        interrupts.take()
        redeliver()
        interrupt()  # a second Ctrl-C while the run cleans up: ignored
        redeliver()
