"""A python agent that raises keeps its traceback, as pytest shows a test's: its own frames only,
masked of secrets, in the result and the turns table; ``-v`` prints it and the viewer shows it.
The one-line message stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

from farm.cli.app import app
from typer.testing import CliRunner

from farm.results import read_run
from farm.view.transcript import case_detail

AGENT = '''
import os


def _lookup(order):
    raise ValueError(f"boom: no order {order} (key {os.environ['SHOP_KEY']})")


def shop(messages, options):
    return _lookup(messages[-1]["content"])
'''

TOML = """
[farm]
default_agent = "shop"
results_dir = "results"

[connectors.llm]
base_url = "http://127.0.0.1:9/v1"
api_key_env = "SHOP_KEY"

[agents.shop]
kind = "python"
entry = "{module}:shop"
"""


def test_a_raising_python_agent_keeps_its_own_frames_masked_in_the_result_and_shows_them_with_v(python_project, tmp_path: Path, monkeypatch):
    secret = "sk-shop-0123456789abcdef0123"
    monkeypatch.setenv("SHOP_KEY", secret)
    module = python_project(AGENT, TOML, {})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["test", "-i", "A-17", "--engine", "local", "-v"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    (record,) = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    turn = record["turns"][0]
    assert turn["error"].startswith(f"agent error: agent 'shop' ({module}:shop) raised ValueError: boom: no order A-17")  # the one line, as before
    trace = turn["traceback"]
    assert trace.startswith("Traceback (most recent call last):\n")
    assert f'{module}.py", line 10, in shop' in trace and f'{module}.py", line 6, in _lookup' in trace
    assert trace.rstrip().endswith("ValueError: boom: no order A-17 (key ***)")
    assert "farm/" not in trace and "concurrent/futures" not in trace  # the farm's frames and its threads' left out
    assert secret not in result.output and secret[3:15] not in trace
    assert "_lookup" in result.output  # -v prints it under the turn's error (a long path may wrap its line)
    quiet = CliRunner().invoke(app, ["test", "-i", "A-18", "--engine", "local"], catch_exceptions=False)
    assert "Traceback" not in quiet.output  # without -v, the one line
    run = read_run(run_dir)
    (step,) = case_detail(run, record["id"])["repetitions"][0]["turns"]
    assert step["traceback"] == trace  # what the viewer's case page shows


ROLES = '''
def shop(messages, options):
    return "fine"


def customer(messages, options):
    return _next_line(options)


def _next_line(options):
    raise KeyError("persona")
'''

ROLES_TOML = """
[farm]
default_agent = "shop"
simulator = "customer"
results_dir = "results"

[agents.shop]
kind = "python"
entry = "{module}:shop"

[agents.customer]
kind = "python"
entry = "{module}:customer"
"""


def test_a_raising_python_simulator_keeps_its_frames_in_the_role_log_and_shows_them_with_v(python_project, tmp_path: Path, monkeypatch, engine: str):
    module = python_project(ROLES, ROLES_TOML, {})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.jsonl").write_text(json.dumps({"id": "dyn", "max_turns": 2, "checkpoints": [{"id": "ok", "assertion": {"type": "contains", "value": "fine"}}]}) + "\n")
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--engine", engine, "-v"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    (run_dir,) = (tmp_path / "results").iterdir()
    (record,) = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    assert record["status"] == "error" and record["error_role"] == "simulator"
    (failed,) = [call for call in record["role_log"] if call["error"]][:1]
    assert failed["role"] == "simulator" and f'{module}.py", line 7, in customer' in failed["traceback"]
    assert failed["traceback"].rstrip().endswith("KeyError: 'persona'")
    assert "The simulator (customer) raised:" in result.output and "_next_line" in result.output


SILENT = '''
def answers_elsewhere(messages, options):
    return {"answer": "Hello"}  # a dict reply without 'content'


def simulate(messages, options):
    return {"input": "and then?", "goal_achieved": len(messages) > 2}  # a role's dict is its answer
'''

SILENT_TOML = """
[farm]
default_agent = "dict"
simulator = "sim"
results_dir = "results"

[agents.dict]
kind = "python"
entry = "{module}:answers_elsewhere"

[agents.sim]
kind = "python"
entry = "{module}:simulate"
"""


def test_a_dict_reply_without_content_is_an_error_not_an_empty_reply_that_passes_not_contains(python_project, tmp_path: Path, monkeypatch):
    python_project(SILENT, SILENT_TOML, {})
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.jsonl").write_text(json.dumps({"id": "polite", "input": "hi", "assertions": [{"type": "not_contains", "value": "sorry"}]}) + "\n")
    result = CliRunner().invoke(app, ["test", "-i", "suite.jsonl", "--engine", "local", "-q"], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # never a pass on an empty reply
    (run_dir,) = (tmp_path / "results").iterdir()
    (record,) = map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())
    assert record["status"] == "error"
    assert "it returned a dict with no 'content' nor 'tool_calls' (its keys: 'answer')" in record["error"]


def test_a_python_simulator_may_still_answer_with_a_dict(python_project, tmp_path: Path, monkeypatch):
    from farm.agents.python import reply_from

    assert reply_from({"input": "x"}, answers=True).raw == {"input": "x"}  # a role reads the dict whole
