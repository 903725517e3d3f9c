"""``farm validate`` refuses what ``farm test`` refuses before its first call, with the same
sentence: one list of mistakes, each given to both commands (a real agent on 127.0.0.1 shows
that ``farm test`` called nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from farm.cli.app import app
from typer.testing import CliRunner

import farm
from farm.demo.server import JSONServer, Response, chat_completion
from farm.errors import UsageError

BASE_TOML = """[farm]
default_agent = "target"
simulator = "sim"
validator = "judge"
results_dir = "results"

[connectors.local]
base_url = "{url}/v1"

[agents.target]
connector = "local"

[agents.sim]
kind = "python"
entry = "roles:simulate"

[agents.judge]
kind = "python"
entry = "roles:judge"

[agents.grader]
kind = "validator"
uses = "judge"
"""

ROLES = """
import json

def simulate(messages, options):
    return json.dumps({"input": "hi", "goal_achieved": len(messages) > 2})

def judge(messages, options):
    return json.dumps({"passed": True, "reason": "fine"})

def bare():
    return "hi"

def one(messages):
    return "hi"
"""

DYNAMIC = {"id": "dyn", "checkpoints": [{"id": "said", "assertion": {"type": "contains", "value": "fine"}}], "max_turns": 2}
JUDGED = {"id": "judged", "input": "hi", "assertions": [{"type": "agent", "value": "polite"}]}

MISTAKES = {
    "a misspelt default_agent": (
        ('default_agent = "target"', 'default_agent = "targt"'),
        [],
        "farm.toml:2: key 'default_agent': agent 'targt' is not configured (did you mean 'target'?)",
    ),
    "a default_agent that is a role": (
        ('default_agent = "target"', 'default_agent = "grader"'),
        [],
        "farm.toml:2: key 'default_agent': agent 'grader' is a validator, a role the farm plays, not an agent to test",
    ),
    "a [farm].simulator that names no agent": (
        ('simulator = "sim"', 'simulator = "simm"'),
        [],
        "farm.toml:3: key 'simulator': agent 'simm' is not configured (did you mean 'sim'?)",
    ),
    "a [farm].validator that names no agent": (
        ('validator = "judge"', 'validator = "jduge"'),
        [],
        "key 'validator': agent 'jduge' is not configured",
    ),
    "a python entry whose function does not exist": (
        ('entry = "roles:simulate"', 'entry = "roles:simulat"'),
        [],
        "farm.toml:15: key 'entry': module 'roles' has no attribute 'simulat' (did you mean 'simulate'?)",
    ),
    "a case's simulator.use that names no agent": (
        None,
        [{**DYNAMIC, "id": "own", "simulator": {"use": "agents:usr"}}],
        "field 'simulator.use': agent 'usr' is not configured",
    ),
    "an agent assertion whose use names no agent": (
        None,
        [{**JUDGED, "id": "own", "assertions": [{"type": "agent", "use": "agents:jduge", "value": "x"}]}],
        "field 'assertions[0].use': agent 'jduge' is not configured",
    ),
    "a case's unknown field": (None, [{"id": "typo", "inptu": "hi"}], "field 'inptu': unknown field (did you mean 'input'?)"),
    "a case's value of the wrong kind": (
        None,
        [{"id": "negated", "input": "hi", "assertions": [{"type": "contains", "value": "x", "negate": "ture"}]}],
        "field 'assertions[0].negate': 'ture' is not true or false",
    ),
    "a misspelt checkpoints": (
        None,
        [{"id": "typo", "simulator": {"use": "agents:sim"}, "checkpoint": DYNAMIC["checkpoints"]}],
        "field 'checkpoint': unknown field (did you mean 'checkpoints'?)",
    ),
    "a line that is not JSON beside a case with a mistake": (
        None,
        ['{"id": "comma", "input": "hi"},', {"id": "typo", "inptu": "hi"}],
        "suite.jsonl:3: not valid JSON: a trailing comma at column 31 (a line holds one case, with nothing after it)",
    ),
    "a case's mistake after a line that is not JSON": (
        None,
        ['{"id": "comma", "input": "hi"},', {"id": "typo", "inptu": "hi"}],
        "suite.jsonl:4: field 'inptu': unknown field (did you mean 'input'?)",
    ),
    "a case that compares with a golden conversation and no golden folder": (
        None,
        [{"id": "gold", "input": "hi", "golden": True}],
        "field 'golden': case 'gold' compares with a golden conversation, but the run has no golden folder",
    ),
    "a dynamic case whose every checkpoint is optional": (
        None,
        [{**DYNAMIC, "id": "optional", "checkpoints": [{**DYNAMIC["checkpoints"][0], "required": False}]}],
        "field 'checkpoints': every checkpoint is required: false",
    ),
    "a key of a case given twice": (
        None,
        ['{"id": "twice", "input": "hi", "assertions": [{"type": "contains", "value": "NOPE"}], "assertions": []}'],
        "suite.jsonl:3: the key 'assertions' is given twice in one object",
    ),
    "a message with a misspelt role": (
        None,
        [{"id": "role", "input": [{"role": "usr", "content": "hi"}]}],
        "(did you mean 'user'?)",
    ),
    "an empty text to look for, which every reply holds": (
        None,
        [{"id": "empty", "input": "hi", "assertions": [{"type": "contains", "value": []}]}],
        "suite.jsonl:3: field 'assertions[0].value': an empty value matches every reply; give the text to look for",
    ),
    "an empty text that must be absent, which every reply holds": (
        None,
        [{"id": "empty", "input": "hi", "assertions": [{"type": "not_contains", "value": ["x", ""]}]}],
        "suite.jsonl:3: field 'assertions[0].value[1]': an empty value matches every reply; give the text that must be absent",
    ),
    "a trajectory of no tools": (
        None,
        [{"id": "none", "input": "hi", "assertions": [{"type": "trajectory", "tools": []}]}],
        "suite.jsonl:3: field 'assertions[0].tools': give at least one tool name",
    ),
    "a count that is not a number": (
        None,
        [{"id": "two", "input": "hi", "assertions": [{"type": "span_count", "operation": "chat", "min": "two"}]}],
        "suite.jsonl:3: field 'assertions[0].min': 'two' is not a whole number",
    ),
    "a misspelt trajectory order": (
        None,
        [{"id": "order", "input": "hi", "assertions": [{"type": "trajectory", "tools": ["a"], "order": "in-order"}]}],
        "suite.jsonl:3: field 'assertions[0].order': 'in-order' is not one of exact, in_order, any (did you mean 'in_order'?)",
    ),
    "a min above the max": (
        None,
        [{"id": "range", "input": "hi", "assertions": [{"type": "tool_executed", "name": "book", "min": 5, "max": 2}]}],
        "suite.jsonl:3: field 'assertions[0]': 'min' (5) is more than 'max' (2), so no number is within them",
    ),
    "a JSONPath that does not parse": (
        None,
        [{"id": "path", "input": "hi", "assertions": [{"type": "json_path", "path": "$.[[[", "value": 1}]}],
        "suite.jsonl:3: field 'assertions[0].path': '$.[[[' is not a JSONPath (at character 4)",
    ),
    "a regex given both a pattern and a value": (
        None,
        [{"id": "both", "input": "hi", "assertions": [{"type": "regex", "pattern": "fine", "value": "coarse"}]}],
        "suite.jsonl:3: field 'assertions[0]': give one of 'pattern' and 'value', not both",
    ),
    "an assertion that is an array": (
        None,
        [{"id": "nested", "input": "hi", "assertions": [[]]}],
        "suite.jsonl:3: field 'assertions[0]': every assertion must be an object or a type name, not []",
    ),
    "a checkpoint given an array of assertions": (
        None,
        [{**DYNAMIC, "id": "many", "checkpoints": [{"id": "said", "assertion": [{"type": "contains", "value": "fine"}]}]}],
        "suite.jsonl:3: field 'checkpoints[0].assertion': a checkpoint takes one assertion (an object or a type name), not an array; give each condition its own checkpoint",
    ),
    "a budget with no price": (('results_dir = "results"', 'results_dir = "results"\nmax_cost = 1.0'), [], "no connector in"),
    "a budget that cannot count the tested agent's calls": (
        (
            'results_dir = "results"',
            'results_dir = "results"\nmax_cost = 1.0\n\n[connectors.priced]\nbase_url = "{url}/v1"\nprice = { input = 1.0, output = 1.0 }',
        ),
        [],
        "[farm].max_cost $1: agent 'target' calls connector 'local' in",
    ),
    "a connector key that is not set": (
        ('base_url = "{url}/v1"', 'base_url = "{url}/v1"\napi_key_env = "FARM_TEST_UNSET_KEY"'),
        [],
        "farm.toml:9: key 'api_key_env': connector 'local' (used by agent 'target') reads its key from $FARM_TEST_UNSET_KEY, which is not set",
    ),
    "an http agent with no url nor connector": (
        ('[agents.target]\nconnector = "local"', '[agents.target]\nkind = "http"'),
        [],
        "farm.toml:10: key 'url': kind \"http\" needs a url (or a connector, whose base_url it is sent to)",
    ),
    "an openai agent with no connector": (
        ('[agents.target]\nconnector = "local"', '[agents.target]\nkind = "openai"'),
        [],
        'farm.toml:10: key \'connector\': kind "openai" needs a connector (set connector = "<name>", or pass -c)',
    ),
    "a role agent with neither uses nor connector": (
        ('[agents.sim]\nkind = "python"\nentry = "roles:simulate"', '[agents.sim]\nkind = "simulator"'),
        [],
        'farm.toml:13: key \'uses\': a simulator agent needs "uses" (the agent that plays it) or a "connector"',
    ),
    "a connector's base_url without its scheme": (
        ('base_url = "{url}/v1"', 'base_url = "localhost:8000/v1"'),
        [],
        "farm.toml:8: key 'base_url': 'localhost:8000/v1' is not a URL: a URL begins with http:// or https:// and a host"
        " (did you mean 'http://localhost:8000/v1'?)",
    ),
    "an http agent's url that is no URL": (
        ('[agents.target]\nconnector = "local"', '[agents.target]\nkind = "http"\nurl = "not a url"'),
        [],
        "farm.toml:12: key 'url': 'not a url' is not a URL: a URL begins with http:// or https:// and a host",
    ),
    "an http agent's method that is no method": (
        ('[agents.target]\nconnector = "local"', '[agents.target]\nkind = "http"\nconnector = "local"\nmethod = "FETCH"'),
        [],
        "farm.toml:13: key 'method': 'FETCH' is not a method an http agent sends with: POST, PUT, PATCH, GET or DELETE",
    ),
    "an http agent's content_path that is no JSONPath": (
        ('[agents.target]\nconnector = "local"', '[agents.target]\nkind = "http"\nconnector = "local"\ncontent_path = "$.[[["'),
        [],
        "farm.toml:13: key 'content_path': '$.[[[' is not a JSONPath (at character 4)",
    ),
    "a min_pass_rate above 1": (
        ('results_dir = "results"', 'results_dir = "results"\nmin_pass_rate = 2'),
        [],
        "farm.toml:6: key 'min_pass_rate': 2 is not a share of tries between 0 (excluded) and 1, e.g. 0.8",
    ),
    "an otlp_endpoint that is no URL": (
        ('results_dir = "results"', 'results_dir = "results"\notlp_endpoint = "notaurl"'),
        [],
        "farm.toml:6: key 'otlp_endpoint': 'notaurl' is not an http(s) URL of an OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318)",
    ),
    "a python agent's function that takes no arguments": (
        ('entry = "roles:simulate"', 'entry = "roles:bare"'),
        [],
        "farm.toml:15: key 'entry': 'roles:bare' takes no arguments; an agent function takes (messages, options)",
    ),
    "a python role function that takes one argument": (
        ('entry = "roles:judge"', 'entry = "roles:one"'),
        [],
        "farm.toml:19: key 'entry': 'roles:one' takes (messages); an agent function takes (messages, options)",
    ),
    "a string that is not closed": (
        ('default_agent = "target"', 'default_agent = "target'),
        [],
        "farm.toml:2:24: not valid TOML: key 'default_agent': a string is not closed on its line (end it with its quote)",
    ),
    "text without quotes": (
        ('default_agent = "target"', "default_agent = target"),
        [],
        "farm.toml:2:17: not valid TOML: key 'default_agent': target is not a TOML value; text goes in quotes: default_agent = \"target\"",
    ),
    "a key of farm.toml given twice": (
        ('results_dir = "results"', 'results_dir = "results"\nsimulator = "judge"'),
        [],
        "farm.toml:6:20: not valid TOML: key 'simulator' is given twice in [farm] (first at line 3); keep one",
    ),
    "a table declared twice": (
        ("[agents.grader]", '[agents.sim]\nmodel = "m"\n\n[agents.grader]'),
        [],
        "farm.toml:21:12: not valid TOML: table [agents.sim] is declared twice (first at line 13); write its keys under one header",
    ),
}
"""Each mistake: a change to ``farm.toml`` (old, new), cases added to the suite (a string: the line as
written), and what both commands say."""


@pytest.fixture(scope="module")
def server():
    with JSONServer(lambda path, body, headers: Response(chat_completion("fine"))) as s:
        yield s


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_validate_refuses_what_test_refuses_with_the_same_sentence(
    mistake: str, tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch
):
    change, cases, said = MISTAKES[mistake]
    text = BASE_TOML
    if change is not None:
        assert change[0] in text
        text = text.replace(change[0], change[1])
    (tmp_path / "farm.toml").write_text(text.replace("{url}", server.url))
    (tmp_path / "roles.py").write_text(ROLES)
    (tmp_path / "suite.jsonl").write_text(
        "".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in [DYNAMIC, JUDGED, *cases])
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FARM_TEST_UNSET_KEY", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))

    checked = CliRunner().invoke(app, ["validate", "suite.jsonl"], catch_exceptions=False)
    before = server.requests
    tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl"], catch_exceptions=False)
    assert (checked.exit_code, tested.exit_code) == (2, 2), (checked.output, tested.output)
    assert said in checked.output and said in tested.output, (checked.output, tested.output)
    assert server.requests == before and not (tmp_path / "results").exists()


def test_the_project_without_a_mistake_passes_both(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch):
    """The list's base is sound: each test above fails for its one mistake alone."""
    (tmp_path / "farm.toml").write_text(BASE_TOML.replace("{url}", server.url))
    (tmp_path / "roles.py").write_text(ROLES)
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [DYNAMIC, JUDGED]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    checked = CliRunner().invoke(app, ["validate", "suite.jsonl"], catch_exceptions=False)
    assert checked.exit_code == 0, checked.output
    assert checked.output.strip() == "2 valid case(s) in 1 file(s); 0 problem(s)"
    tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl"], catch_exceptions=False)
    assert tested.exit_code == 0, tested.output
    assert "2 passed" in tested.output


def test_a_config_problem_is_the_configs_and_the_valid_suite_is_counted(
    tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch
):
    """An agent's entry that does not import is one problem of farm.toml: the suite is still checked and its cases counted."""
    (tmp_path / "farm.toml").write_text(
        BASE_TOML.replace("{url}", server.url).replace('entry = "roles:judge"', 'entry = "roles:jduge"')
    )
    (tmp_path / "roles.py").write_text(ROLES)
    (tmp_path / "suite.jsonl").write_text("".join(json.dumps(c) + "\n" for c in [DYNAMIC, JUDGED]))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    checked = CliRunner().invoke(app, ["validate", "suite.jsonl"], catch_exceptions=False)
    assert checked.exit_code == 2
    assert checked.output.splitlines() == [
        "error: farm.toml:19: key 'entry': module 'roles' has no attribute 'jduge' (did you mean 'judge'?)",
        "2 valid case(s) in 1 file(s); 1 problem(s)",
    ]


def project(
    tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch, cases: list[dict], suite: str = "suite.jsonl"
) -> None:
    (tmp_path / "farm.toml").write_text(BASE_TOML.replace("{url}", server.url))
    (tmp_path / "roles.py").write_text(ROLES)
    (tmp_path / suite).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / suite).write_text("".join(json.dumps(c) + "\n" for c in cases))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_an_empty_suite_is_refused_by_both(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch):
    project(tmp_path, server, monkeypatch, [])
    checked = CliRunner().invoke(app, ["validate", "suite.jsonl"], catch_exceptions=False)
    tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl"], catch_exceptions=False)
    dry = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl", "--dry-run"], catch_exceptions=False)
    assert (checked.exit_code, tested.exit_code, dry.exit_code) == (2, 2, 2)
    for output in (checked.output, tested.output, dry.output):
        assert "suite.jsonl: no test cases to run" in output


def test_a_reporter_that_is_not_configured_is_refused_before_any_call(
    tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch
):
    project(tmp_path, server, monkeypatch, [JUDGED])
    before = server.requests
    tested = CliRunner().invoke(
        app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl", "-r", "jduge"], catch_exceptions=False
    )
    assert tested.exit_code == 2, tested.output
    assert "-r jduge: agent 'jduge' is not configured" in tested.output and "(did you mean 'judge'?)" in tested.output
    assert server.requests == before and not (tmp_path / "results").exists()


def test_a_one_word_message_that_names_a_suite_file_is_refused(
    tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch
):
    project(tmp_path, server, monkeypatch, [JUDGED], suite="suites/smoke.jsonl")
    before = server.requests
    tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "smoke"], catch_exceptions=False)
    assert tested.exit_code == 2, tested.output
    assert (
        "-i smoke: read as a message, but suites/smoke.jsonl is a suite file: give its path (-i suites/smoke.jsonl)"
        in tested.output
    )
    assert server.requests == before
    message = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "Hello"], catch_exceptions=False)
    assert message.exit_code == 0 and "(-i was a message, not a suite file)" in message.output  # a word that names no suite


def test_a_folders_suite_files_it_does_not_run_are_said(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch):
    project(tmp_path, server, monkeypatch, [JUDGED], suite="suites/a.jsonl")
    (tmp_path / "suites" / "b.json").write_text(
        json.dumps([{"id": "failing", "input": "hi", "assertions": [{"type": "contains", "value": "NOPE"}]}])
    )
    said = "suites: b.json is not run: a folder runs its *.jsonl files (give it as "
    tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suites"], catch_exceptions=False)
    assert tested.exit_code == 0, tested.output
    assert f"warning: -i {said}-i suites/b.json to run it)" in tested.output
    checked = CliRunner().invoke(app, ["validate", "suites"], catch_exceptions=False)
    assert f"warning: {said}suites/b.json to run it)" in checked.output


def test_a_selection_that_matches_no_case_names_itself(tmp_path: Path, server: JSONServer, monkeypatch: pytest.MonkeyPatch):
    project(tmp_path, server, monkeypatch, [JUDGED])
    for flags, said in ((["--run", "zzz"], "--run zzz"), (["--tag", "nope"], "--tag nope"), (["--run", "zzz", "--dry-run"], "--run zzz")):
        tested = CliRunner().invoke(app, ["test", "-q", "--engine", "local", "-i", "suite.jsonl", *flags], catch_exceptions=False)
        assert tested.exit_code == 2 and f"suite.jsonl: no test case matches {said}" in tested.output, tested.output
    with pytest.raises(UsageError, match="no test case matches --run zzz"):
        farm.run("suite.jsonl", match="zzz", dry_run=True)
