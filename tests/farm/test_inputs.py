"""farm.inputs: what ``-i`` names, resolved to a suite."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from farm.config import FarmConfig, load_config
from farm.errors import UsageError
from farm.inputs import (
    PATH_RULE,
    expand_inputs,
    generator_metadata,
    input_kind,
    input_path,
    load_inputs,
    looks_like_path,
    resolve_input,
    typed_query,
)
from farm.results._suites import suite_of
from farm.roles.generation import generate_locally


def test_typed_query_types_ints_floats_and_booleans():
    assert typed_query("count=3&ratio=0.5&strict=TRUE&off=false&focus=edge-cases&empty=") == {
        "count": 3,
        "ratio": 0.5,
        "strict": True,
        "off": False,
        "focus": "edge-cases",
        "empty": "",
    }
    assert typed_query("") == {}


def test_input_path_is_a_file_only_for_file_inputs(tmp_path: Path):
    existing = tmp_path / "cases.txt"
    existing.write_text("")
    assert input_path("suite.jsonl") == Path("suite.jsonl")  # by its suffix, even before it exists
    assert input_path(str(existing)) == existing
    assert input_path(["Hello there", str(existing)]) == existing  # the first file among several
    assert input_path(str(tmp_path)) == tmp_path / "_"  # farm.toml is looked for from inside a folder
    assert input_path(f"{tmp_path}/s*/x.jsonl") == tmp_path / "s"
    for value in ("-", "agents:gen", "scripts:tests.gen", "scripts.tests.checks", "Hello there"):
        assert input_path(value) is None


GENERATORS = """
import json

def generate(messages, options):
    meta = options['metadata']
    return json.dumps({'cases': [{'id': f'g{i}', 'input': f"{meta['focus']} {i}"} for i in range(meta['count'])]})

def mute(messages, options):
    return 'no cases today'
"""

GENERATOR_SCRIPTS = """
def main(meta):
    return {'cases': [{'id': 'a', 'input': meta['target_agent']}, {'id': 'b', 'input': str(meta['count'])}]}

def one(meta):
    return {'id': 'only', 'input': meta['focus']}

def number(meta):
    return 7

def fails(meta):
    raise RuntimeError('no inspiration')
"""

FARM_TOML = """
[agents.target]
kind = "python"
entry = "{module}:generate"
description = "files expenses"
tools = [{type = "function", function = {name = "create_expense"}}, {name = "lookup"}, "plain"]

[agents.gen-code]
kind = "python"
entry = "{module}:generate"

[agents.gen]
kind = "generator"
uses = "gen-code"

[agents.mute-code]
kind = "python"
entry = "{module}:mute"

[agents.mute]
kind = "generator"
uses = "mute-code"
"""


@pytest.fixture
def project(tmp_path: Path, python_project) -> Path:
    python_project(GENERATORS, FARM_TOML, {"gen.py": GENERATOR_SCRIPTS})
    return tmp_path


def test_generator_metadata_describes_the_target_and_takes_the_query(project: Path):
    config = load_config(project / "farm.toml")
    meta = generator_metadata(config, "target", {"count": 2})
    assert meta == {
        "test_mode": "generator",
        "count": 2,
        "focus": "happy-path",
        "complexity": "medium",
        "target_agent": "target",
        "target_description": "files expenses",
        "target_tools": ["create_expense", "lookup", "plain"],
    }
    assert generator_metadata(config, None, {})["count"] == 5


def test_a_file_stdin_and_a_message_resolve_to_cases(project: Path):
    config = load_config(project / "farm.toml")
    suite_file = project / "cases.jsonl"
    suite_file.write_text(json.dumps({"id": "f1", "input": "hi"}) + "\n")
    assert [c.id for c in resolve_input(str(suite_file), config, None).cases] == ["f1"]
    stdin = io.StringIO(json.dumps({"id": "s1", "input": "hey"}) + "\n")
    assert [c.id for c in resolve_input("-", config, None, stdin=stdin).cases] == ["s1"]
    message = resolve_input("Hello there", config, None)
    assert [c.id for c in message.cases] == ["message"] and message.cases[0].case.input == "Hello there"


def generated(suite, config) -> list:
    """The cases a generator suite's stream writes, generated in this process."""
    assert suite.cases == [] and suite.feed.stream is not None
    return [c.materialized() for c in generate_locally(suite.feed.stream, config)]


def test_a_generator_agent_gives_a_stream_that_writes_the_cases(project: Path):
    config = load_config(project / "farm.toml")
    suite = resolve_input("agents:gen?count=3&focus=refunds", config, "target")
    assert suite.description == "agents:gen (3 cases to generate)"
    cases = generated(suite, config)
    assert [c.id for c in cases] == ["g0", "g1", "g2"]
    assert [c.case.input for c in cases] == ["refunds 0", "refunds 1", "refunds 2"]
    assert cases[0].source == "agents:gen batch 1, case 1"


def test_a_generator_agent_that_answers_no_cases_is_one_sentence(project: Path):
    config = load_config(project / "farm.toml")
    suite = resolve_input("agents:mute", config, "target")
    with pytest.raises(UsageError, match="-i agents:mute: the generator failed: the generator answered no JSON"):
        generated(suite, config)
    with pytest.raises(UsageError, match="-i agents:: name the agents id after 'agents:'"):
        resolve_input("agents:", config, "target")
    with pytest.raises(UsageError, match="-i agents:gen: 'batch' must be a whole number of at least 1, not 0"):
        resolve_input("agents:gen?batch=0", config, "target")


def test_a_generator_script_writes_the_cases(project: Path):
    config = load_config(project / "farm.toml")
    cases = generated(resolve_input("scripts:gen?count=9", config, "target"), config)
    assert [(c.id, c.case.input) for c in cases] == [("a", "target"), ("b", "9")]
    one = generated(resolve_input("scripts:gen.one?focus=edge", config, None), config)
    assert [(c.id, c.case.input) for c in one] == [("only", "edge")]


def test_a_generator_script_that_fails_or_returns_no_cases_is_one_sentence(project: Path):
    config = load_config(project / "farm.toml")
    with pytest.raises(UsageError, match="-i scripts:gen.fails: the generator script failed: RuntimeError: no inspiration"):
        generated(resolve_input("scripts:gen.fails", config, None), config)
    with pytest.raises(UsageError, match="-i scripts:gen.number: the generator script returned int, not cases"):
        generated(resolve_input("scripts:gen.number", config, None), config)


def test_a_generate_table_with_a_misspelt_key_is_one_sentence_naming_farm_toml(project: Path):
    toml = project / "farm.toml"
    toml.write_text(toml.read_text() + '\n[agents.typo]\nkind = "generator"\nuses = "gen-code"\ngenerate = { cuont = 20 }\n')
    config = load_config(toml)
    with pytest.raises(UsageError, match=r"farm\.toml: agents\.typo\.generate: unknown parameter 'cuont' \(did you mean 'count'\?\)"):
        resolve_input("agents:typo", config, "target")
    own = resolve_input("agents:gen?region=emea", config, "target")  # a service of its own may read its own parameters
    assert own.feed.stream is not None and own.feed.stream.metadata["region"] == "emea"


def test_a_value_that_looks_like_a_path_is_one_and_anything_else_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.txt").write_text("")
    (tmp_path / "suites").mkdir()
    for value in ("cases.txt", "suites", "suites/smoke", "smoke.jsnol", "./x", "*.jsonl", "case[12].jsonl", "a\\b" if os.sep == "\\" else "a/b"):
        assert looks_like_path(value) and input_kind(value) == "file", value
    for value in ("Hello, I need help", "Hello?", "Hi.", "e.g.", "3.14", "a message with suites/smoke in it", ""):
        assert not looks_like_path(value) and input_kind(value) == "message", value
    for value, kind in (("-", "stdin"), ("agents:gen?count=3", "generator"), ("scripts:gen.x", "generator"), ("scripts.checks", "script-tests")):
        assert input_kind(value) == kind


def test_expand_inputs_sorts_folders_and_globs_and_runs_a_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s").mkdir()
    for name in ("b.jsonl", "a.jsonl", "c.json", "notes.md"):
        (tmp_path / "s" / name).write_text("")
    assert [i.value for i in expand_inputs("s")] == ["s/a.jsonl", "s/b.jsonl"]  # a folder: its *.jsonl
    assert [i.value for i in expand_inputs("s/*")] == ["s/a.jsonl", "s/b.jsonl", "s/c.json"]  # a glob: its suite files
    assert [i.value for i in expand_inputs(["s/b.jsonl", "s", str(tmp_path / "s" / "a.jsonl")])] == ["s/b.jsonl", "s/a.jsonl"]
    assert [(i.value, i.kind) for i in expand_inputs(["s/a.jsonl", "Hello there"])] == [("s/a.jsonl", "file"), ("Hello there", "message")]
    with pytest.raises(UsageError, match=r"^-i s/a\.jsnol: no such file or folder \(did you mean 's/a\.jsonl'\?\)"):
        expand_inputs("s/a.jsnol")
    with pytest.raises(UsageError, match=r"^-i nowhere/x\.jsonl: no such file or folder; a value"):  # nothing near enough to suggest
        expand_inputs("nowhere/x.jsonl")
    with pytest.raises(UsageError, match="runs on its own"):
        expand_inputs(["agents:gen", "s"])


def test_several_suites_load_as_one_in_order_and_an_id_may_repeat_across_them_but_not_within_one(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text('{"id": "x", "input": "1"}\n{"id": "y", "input": "2"}\n')
    (tmp_path / "b.jsonl").write_text('{"id": "z", "input": "3"}\n{"id": "x", "input": "4"}\n{"id": "z", "input": "5"}\n')
    suite = load_inputs(expand_inputs([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]), FarmConfig(), None)
    assert [(suite_of(c.source), c.id) for c in suite.cases][:4] == [
        (f"{tmp_path}/a.jsonl", "x"), (f"{tmp_path}/a.jsonl", "y"), (f"{tmp_path}/b.jsonl", "z"), (f"{tmp_path}/b.jsonl", "x"),
    ]  # fmt: skip
    (problem,) = suite.problems  # b.jsonl's second z: a repeat within one suite
    assert problem == f"{tmp_path}/b.jsonl:3: field 'id': duplicate id 'z' (first at {tmp_path}/b.jsonl:1)"
    messages = load_inputs(expand_inputs(["hello there", "bye now"]), FarmConfig(), None)
    assert [c.ok for c in messages.cases] == [True, False]  # two messages are the one case 'message' of the suite <message>


def test_the_help_and_the_guide_state_the_path_rule():
    from farm.cli.test import INPUT_HELP

    guide = " ".join((Path(__file__).parents[2] / "docs" / "guide.md").read_text().split())
    assert PATH_RULE in INPUT_HELP
    assert PATH_RULE in guide
