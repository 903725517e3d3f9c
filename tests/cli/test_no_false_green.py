"""Never a false green from an answer that says nothing: a judge or a script whose ``passed`` is
not true or false is the judge's (the script's) error, whatever ``negate`` says; an agent that
replied nothing (null content, an empty body, no tool call) is the case's error, not an empty
reply that passes ``not_contains``. Through the CLI, on both engines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

from farm.demo.server import JSONServer, Response, chat_completion

AGENTS = '''
import json


def polite(messages, options):
    return "Of course, happy to help."


def judge_weird(messages, options):
    """Answers the 'passed' the criteria names, as JSON text: "maybe", null, 1, ..."""
    return json.dumps({"passed": json.loads(options["metadata"]["criteria"]), "reason": "unsure"})


def null_content(messages, options):
    return {"content": None}


def empty_text(messages, options):
    return ""


def waiting(messages, options):
    return {"content": None, "awaiting_input": True}
'''

SCRIPTS = {
    "checks.py": textwrap.dedent(
        """
        def maybe(reply, user_input, options):
            return {"passed": "maybe"}


        def null(reply, user_input, options):
            return {"pass": None}
        """
    )
}

TOML = """
[farm]
default_agent = "polite"
results_dir = "results"
engine = "{engine}"

[agents.polite]
kind = "python"
entry = "{module}:polite"

[agents.judge-svc]
kind = "python"
entry = "{module}:judge_weird"

[agents.judge-weird]
kind = "validator"
uses = "judge-svc"

[agents.null_content]
kind = "python"
entry = "{module}:null_content"

[agents.empty_text]
kind = "python"
entry = "{module}:empty_text"

[agents.waiting]
kind = "python"
entry = "{module}:waiting"
"""


def run(project: Path, cases: list[dict], *args: str) -> tuple[Any, dict[str, dict]]:
    suite = project / "suite.jsonl"
    suite.write_text("".join(json.dumps(c) + "\n" for c in cases))
    out = project / "out.jsonl"
    out.unlink(missing_ok=True)
    result = CliRunner().invoke(
        app, ["test", "-i", str(suite), *args, "-o", str(out), "--config", str(project / "farm.toml")], catch_exceptions=False
    )
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return result, {r["id"]: r for r in records}


GARBLED = {"maybe": "maybe", "upstream": "error: upstream model unavailable", "null": None, "one": 1, "list": [True]}


def test_a_garbled_verdict_is_the_judges_error_even_negated(tmp_path: Path, python_project, engine: str):
    python_project(AGENTS, TOML.replace("{engine}", engine), SCRIPTS)
    cases = [
        {
            "id": f"judge-{name}-{negate}",
            "input": "hi",
            "assertions": [{"type": "agent", "use": "judge-weird", "criteria": json.dumps(value), "negate": negate}],
        }
        for name, value in GARBLED.items()
        for negate in (True, False)
    ]
    cases += [
        {
            "id": f"script-{name}",
            "input": "hi",
            "assertions": [{"type": "script", "use": f"scripts:checks.{name}", "negate": True}],
        }
        for name in ("maybe", "null")
    ]
    cases.append({"id": "judge-yes", "input": "hi", "assertions": [{"type": "agent", "use": "judge-weird", "criteria": '"Yes"'}]})
    result, got = run(tmp_path, cases)
    assert result.exit_code == 1, result.output
    assert "✓ NOT agent" not in result.output
    for name, value in GARBLED.items():
        said = json.dumps(value)
        for negate in (True, False):
            record = got[f"judge-{name}-{negate}"]
            assert (record["status"], record["error_role"]) == ("error", "validator"), record
            assert f"validator error: the validator gave no verdict: its 'passed' is {said}, not true or false" in record["error"]
            (assertion,) = record["turns"][0]["assertions"]
            assert (assertion["passed"], assertion["error"]) == (False, True)
    for name, key, said in (("maybe", "passed", '"maybe"'), ("null", "pass", "null")):
        record = got[f"script-{name}"]
        assert record["status"] == "error", record
        assert f"script scripts:checks.{name} gave no verdict: its '{key}' is {said}, not true or false" in record["error"]
    assert got["judge-yes"]["status"] == "passed"  # a word that says it still reads


def test_a_reply_of_nothing_is_an_error_of_the_case_naming_the_agent(tmp_path: Path, python_project, engine: str):
    python_project(AGENTS, TOML.replace("{engine}", engine), {})
    not_contains = [{"type": "not_contains", "value": "error"}]
    cases = [{"id": agent, "input": "hi", "assertions": not_contains} for agent in ("null_content", "empty_text", "waiting")]
    results = {}
    for case in cases:
        result, got = run(tmp_path, [case], "-n", case["id"])
        results[case["id"]] = (result.exit_code, got[case["id"]])
    code, record = results["null_content"]
    assert (code, record["status"]) == (1, "error"), record
    assert (
        "agent 'null_content'" in record["error"]
        and "it replied nothing: its 'content' is null, with no tool calls nor awaiting_input" in record["error"]
    )
    assert results["empty_text"][1]["status"] == "passed"  # "" said as such is the agent's answer
    assert results["waiting"][1]["status"] == "passed", results["waiting"]  # it awaits input: a reply, with no text


def _endpoint(path: str, body: Any, headers: dict[str, str]) -> Response:
    """An http agent at /null (content null), /empty (200 with an empty body), /text (a
    reply), and an OpenAI one (/v1/chat/completions) whose message content is null."""
    if path.endswith("/null"):
        return Response({"content": None})
    if path.endswith("/empty"):
        return Response(b"")
    if path.endswith("/text"):
        return Response({"content": "fine"})
    completion = chat_completion("x")
    completion["choices"][0]["message"]["content"] = None
    return Response(completion)


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        ("http-null", "it replied nothing: $.content is null"),
        ("http-empty", "it replied nothing: the body is empty"),
        ("openai-null", "it replied nothing: choices[0].message.content is null"),
    ],
)
def test_an_endpoint_that_replies_nothing_is_an_error_not_a_pass_of_not_contains(tmp_path: Path, agent: str, said: str):
    with JSONServer(_endpoint) as server:
        (tmp_path / "farm.toml").write_text(
            f"""
[farm]
results_dir = "results"
engine = "local"

[connectors.local]
base_url = "{server.url}/v1"
model = "m"

[agents.http-null]
kind = "http"
url = "{server.url}/null"

[agents.http-empty]
kind = "http"
url = "{server.url}/empty"

[agents.http-text]
kind = "http"
url = "{server.url}/text"

[agents.openai-null]
connector = "local"
"""
        )
        case = {"id": "c", "input": "hi", "assertions": [{"type": "not_contains", "value": "error"}]}
        result, got = run(tmp_path, [case], "-n", agent)
        fine, good = run(tmp_path, [case], "-n", "http-text")
    assert result.exit_code == 1, result.output
    assert got["c"]["status"] == "error" and f"agent '{agent}'" in got["c"]["error"] and said in got["c"]["error"], got["c"]
    assert (fine.exit_code, good["c"]["status"]) == (0, "passed"), fine.output
