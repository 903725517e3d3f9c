"""Mistakes in ``farm.toml`` and in the agent named to test: every one said at once, with its
line and the nearest known name, exit 2 before any call (a real agent on 127.0.0.1 counts them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion


@pytest.fixture(scope="module")
def server():
    with JSONServer(lambda path, body, headers: Response(chat_completion("fine"))) as s:
        yield s


def farm(*args: str, cwd: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def good_toml(url: str) -> str:
    return f"""[farm]
default_agent = "expense"
results_dir = "results"

[connectors.expense]
base_url = "{url}/v1"

[agents.expense]
connector = "expense"

[agents.judge]
kind = "validator"
connector = "expense"
"""


def test_every_farm_toml_mistake_is_one_line_with_its_line_and_nearest_key_before_any_call(tmp_path: Path, server: JSONServer, monkeypatch):
    text = good_toml(server.url).replace("base_url", "bse_url").replace("/v1\"\n", "/v1\"\nmax_concurency = 4\n")
    (tmp_path / "farm.toml").write_text(text)
    before = server.requests
    result = farm("test", "-i", "hello", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [
        "error: farm.toml:6: key 'bse_url': unknown key (did you mean 'base_url'?)",
        "error: farm.toml:7: key 'max_concurency': unknown key (did you mean 'max_concurrency'?)",
    ]
    assert server.requests == before and not (tmp_path / "results").exists()

    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "input": "x"}) + "\n")
    checked = farm("validate", "s.jsonl", cwd=tmp_path, monkeypatch=monkeypatch)  # the same words, from farm validate
    assert checked.exit_code == 2
    assert "error: farm.toml:6: key 'bse_url': unknown key (did you mean 'base_url'?)" in checked.output
    assert "error: farm.toml:7: key 'max_concurency': unknown key (did you mean 'max_concurrency'?)" in checked.output


def test_an_agent_name_is_checked_before_any_call(tmp_path: Path, server: JSONServer, monkeypatch):
    (tmp_path / "farm.toml").write_text(good_toml(server.url))
    before = server.requests
    typo = farm("test", "-i", "hello", "-n", "expnse", cwd=tmp_path, monkeypatch=monkeypatch)
    assert typo.exit_code == 2
    assert "agent 'expnse' is not configured in" in typo.output and "(did you mean 'expense'?)" in typo.output
    role = farm("test", "-i", "hello", "-n", "judge", cwd=tmp_path, monkeypatch=monkeypatch)
    assert role.exit_code == 2, role.output
    assert role.output.strip() == (
        "error: -n judge: agent 'judge' is a validator, a role the farm plays, not an agent to test; name an openai, http or python agent (expense)"
    )
    assert server.requests == before and not (tmp_path / "results").exists()


def test_without_a_farm_toml_its_absence_is_the_cause(tmp_path: Path, monkeypatch):
    result = farm("test", "-i", "hello", "-n", "expense", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert result.output.startswith("error: no farm.toml in this folder (nor beside the input file or in its parents); agent 'expense' is not configured")

    unnamed = farm("test", "-i", "hello", cwd=tmp_path, monkeypatch=monkeypatch)
    assert unnamed.exit_code == 2
    assert unnamed.output.startswith("error: no farm.toml in this folder (nor beside the input file or in its parents), so no agent to test")
    for said in (result, unnamed):  # a new user's way out is the starter project
        assert said.output.strip().endswith("or run `farm init` for a starter project"), said.output


def test_validate_without_files_says_what_to_name(tmp_path: Path, monkeypatch):
    result = farm("validate", cwd=tmp_path, monkeypatch=monkeypatch)
    assert result.exit_code == 2
    assert result.output.strip() == "error: farm validate FILE...: name the suite files (or folders) to check, e.g. farm validate suites/"


def test_a_farm_toml_that_begins_with_a_byte_order_mark_is_read_and_its_lines_counted(tmp_path: Path, server: JSONServer, monkeypatch):
    """Some editors write a BOM first: the file is read as the suites are, and its problems keep their lines."""
    (tmp_path / "farm.toml").write_text("\ufeff" + good_toml(server.url), encoding="utf-8")
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "input": "x", "assertions": [{"type": "contains", "value": "fine"}]}) + "\n")
    checked = farm("validate", "s.jsonl", cwd=tmp_path, monkeypatch=monkeypatch)
    assert checked.exit_code == 0, checked.output
    tested = farm("test", "-q", "--engine", "local", "-i", "s.jsonl", cwd=tmp_path, monkeypatch=monkeypatch)
    assert tested.exit_code == 0, tested.output

    (tmp_path / "farm.toml").write_text("\ufeff" + good_toml(server.url).replace("max_conc", "x").replace("base_url", "bse_url"), encoding="utf-8")
    broken = farm("validate", "s.jsonl", cwd=tmp_path, monkeypatch=monkeypatch)
    assert broken.exit_code == 2
    assert "error: farm.toml:6: key 'bse_url': unknown key (did you mean 'base_url'?)" in broken.output


def test_a_folder_given_as_config_is_said_to_be_one_and_its_farm_toml_suggested(tmp_path: Path, server: JSONServer, monkeypatch):
    (tmp_path / "suites").mkdir()
    (tmp_path / "s.jsonl").write_text(json.dumps({"id": "a", "input": "x"}) + "\n")
    before = server.requests
    for command in (["validate", "s.jsonl"], ["test", "-i", "s.jsonl"]):
        empty = farm(*command, "--config", "suites", cwd=tmp_path, monkeypatch=monkeypatch)
        assert empty.exit_code == 2
        assert "error: --config: suites is a folder, not a farm.toml file (it holds no farm.toml); give the file's path" in empty.output
    (tmp_path / "suites" / "farm.toml").write_text(good_toml(server.url))
    for command in (["validate", "s.jsonl"], ["test", "-i", "s.jsonl"]):
        holding = farm(*command, "--config", "suites", cwd=tmp_path, monkeypatch=monkeypatch)
        assert holding.exit_code == 2
        assert "error: --config: suites is a folder, not a farm.toml file; did you mean --config suites/farm.toml?" in holding.output
    assert server.requests == before
