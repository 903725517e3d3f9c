"""Mistakes of the user's own setup are errors with their own sentence, never "internal error"."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.agents.base import Reply, ToolCall
from farm.config import Connector, FarmConfig, FarmSettings
from farm.conversation.runner import RunSettings, run_case
from farm.errors import UsageError
from farm.roles.services import FarmServices, LocalRoles
from farm.suite.loader import parse_cases


class CallsLookup:
    async def send(self, messages, options):
        if messages[-1]["role"] == "tool":
            return Reply(content="done.")
        return Reply(content="", tool_calls=[ToolCall(id="c1", name="lookup", arguments={"q": 1})])

    async def aclose(self):
        pass


def run_with_mock(tmp_path: Path, mock: str):
    config = FarmConfig(farm=FarmSettings(scripts_dir=str(tmp_path / "scripts")))
    services = FarmServices(config, LocalRoles(config))
    (loaded,) = parse_cases([("t.jsonl:1", {"id": "m", "input": "go", "tool_mocks": {"lookup": mock}})])
    return asyncio.run(run_case(loaded, CallsLookup(), services, RunSettings()))


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir()
    outside = tmp_path / "outside.py"
    outside.write_text("def main(arguments):\n    return {'stolen': True}\n")
    (folder / "evil.py").symlink_to(outside)
    (folder / "boom.py").write_text("def main(arguments):\n    raise ValueError('no such order')\n")
    (folder / "good.py").write_text("def main(arguments):\n    return {'found': arguments['q']}\n")
    return folder


def test_a_tool_mock_that_escapes_scripts_dir_is_an_error_saying_so(tmp_path: Path, scripts: Path):
    result = run_with_mock(tmp_path, "scripts:evil")
    assert result.status == "error"
    assert result.error.startswith("turn 1: tool mock scripts:evil: ")
    assert "escapes the scripts folder" in result.error and "internal" not in result.error


def test_a_tool_mock_that_raises_is_an_error_naming_it(tmp_path: Path, scripts: Path):
    result = run_with_mock(tmp_path, "scripts:boom")
    assert result.status == "error"
    assert result.error == "turn 1: tool mock scripts:boom failed: ValueError: no such order"


def test_a_good_script_mock_still_answers(tmp_path: Path, scripts: Path):
    result = run_with_mock(tmp_path, "scripts:good")
    assert result.status == "passed", result.error
    assert result.turns[0].tool_calls[0].result == {"found": 1}


def test_an_api_key_with_a_trailing_newline_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("FARM_TEST_NEWLINE_KEY", "sk-abc123\n")
    connector = Connector(name="openai", base_url="http://127.0.0.1:1/v1", api_key_env="FARM_TEST_NEWLINE_KEY")
    with pytest.raises(UsageError, match=r"\$FARM_TEST_NEWLINE_KEY, the API key of connector 'openai', ends with a newline"):
        connector.api_key()
    assert connector.redacted()["api_key"] == "$FARM_TEST_NEWLINE_KEY (set, with a stray newline or space)"


def test_farm_test_stops_before_running_with_one_sentence(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("FARM_TEST_NEWLINE_KEY", "sk-abc123\n")
    (tmp_path / "farm.toml").write_text(
        '[farm]\ndefault_agent = "t"\n[connectors.c]\nbase_url = "http://127.0.0.1:1/v1"\napi_key_env = "FARM_TEST_NEWLINE_KEY"\n'
        '[agents.t]\nkind = "openai"\nconnector = "c"\n'
    )
    result = CliRunner().invoke(app, ["test", "-i", "hello", "--config", str(tmp_path / "farm.toml")], catch_exceptions=False)
    assert result.exit_code == 2
    assert "ends with a newline or space" in result.output and "Traceback" not in result.output
    assert "sk-abc123" not in result.output
