"""farm.config: ``farm.toml`` parsed into typed settings, and its mistakes as one sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from farm.config import FarmConfig, find_config, load_config
from farm.configcheck import key_lines
from farm.errors import ConfigError, UsageError

GOOD = """
[farm]
default_agent = "target"
results_dir = "out"

[connectors.llm]
base_url = "http://127.0.0.1:9/v1"
model = "m"
api_key_env = "FARM_TEST_CONFIG_KEY"
timeout = "2m"
headers = { "X-Api-Key" = "header-secret" }

[agents.target]
connector = "llm"
description = "the one under test"
"""


def write(folder: Path, text: str) -> Path:
    path = folder / "farm.toml"
    path.write_text(text)
    return path


def test_a_config_is_parsed_with_names_durations_and_paths(tmp_path: Path):
    config = load_config(write(tmp_path, GOOD))
    assert config.path == (tmp_path / "farm.toml").resolve()
    assert config.connector("llm").name == "llm"
    assert config.connector("llm").timeout == 120.0
    assert config.agent("target").id == "target"
    assert config.agent("target").kind == "openai"
    assert config.results_dir == tmp_path.resolve() / "out"
    assert config.scripts_dir == tmp_path.resolve() / "scripts"
    assert config.resolve_path("/abs/x") == Path("/abs/x")


def test_no_file_means_the_defaults():
    config = load_config(None)
    assert config.path is None and config.agents == {} and config.farm.results_dir == "farm-results"
    assert config.base_dir == Path.cwd()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[farm\n", ":1:6: not valid TOML: a [table] header is not closed with ]"),
        ("[farm]\nunknown = 1\n", ":2: key 'unknown': unknown key"),
        ('[connectors.c]\nbase_url = "http://u"\nrpm = 0\n', ":3: key 'rpm': must be at least 1, not 0"),
        ('[connectors.c]\nbase_url = "http://u"\ntimeout = "soon"\n', ":3: key 'timeout': 'soon' is not a duration"),
        ('[agents.a]\nkind = "robot"\n', ":2: key 'kind': 'robot' is not one of openai, http, python, simulator, validator, generator, reporter"),
        ('[agents.a]\nkind = "opnai"\n', ":2: key 'kind': 'opnai' is not one of openai, http, python, simulator, validator, generator, reporter (did you mean 'openai'?)"),
        ('[agents.a]\nconnector = "nowhere"\n', ":2: key 'connector': connector 'nowhere' is not configured"),
        ('[agents.a]\nuses = "nobody"\n', ":2: key 'uses': agent 'nobody' is not configured"),
        ('[farm]\nactors = "many"\n', ":2: key 'actors': must be a whole number, not 'many'"),
        ('[farm]\nattributor = "judg"\n[agents.judge]\nkind = "validator"\n', ":2: key 'attributor': agent 'judg' is not configured (did you mean 'judge'?)"),
        ('[farm]\nsimulator_failures = "errors"\n', ":2: key 'simulator_failures': 'errors' is not one of failure, error"),
        ("[connectors.c]\nmodel = 'm'\n", ":1: key 'base_url': required, and missing from [connectors.c]"),
    ],
)
def test_a_mistake_is_one_sentence_naming_file_line_and_key(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}{message}" or str(caught.value).startswith(f"{path}{message}")
    assert "\n" not in str(caught.value).strip()
    assert "Input should" not in str(caught.value) and "Value error" not in str(caught.value)  # never pydantic's words


TYPOS = """[farm]
default_agent = "expense"

[connectors.expense]
bse_url = "http://127.0.0.1:9/v1"
max_concurency = 4
price = { input = 1.0, ouput = 2.0 }

[connectors."my llm"]   # a quoted name
base_url = "http://127.0.0.1:9/v1"
"rpm" = 0

[agents.expense]
connector = "expnse"
resources.num_cpu = 1

[agents.judge]
kind = "validator"
connector = "my llm"
"""


def test_every_mistake_of_farm_toml_is_said_at_once_with_its_line_and_the_nearest_key(tmp_path: Path):
    path = write(tmp_path, TYPOS)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [
        f"{path}:5: key 'bse_url': unknown key (did you mean 'base_url'?)",
        f"{path}:6: key 'max_concurency': unknown key (did you mean 'max_concurrency'?)",
        f"{path}:7: key 'ouput': unknown key (did you mean 'output'?)",
        f"{path}:11: key 'rpm': must be at least 1, not 0",
        f"{path}:14: key 'connector': connector 'expnse' is not configured (did you mean 'expense'?)",
        f"{path}:15: key 'num_cpu': unknown key (did you mean 'num_cpus'?)",
    ]  # the required base_url and output that the typos miss are not said twice
    assert str(caught.value) == caught.value.problems[0] + " (and 5 more)"


def test_key_lines_reads_headers_dotted_quoted_and_inline_keys():
    text = '[a]\nx = 1\n[b."c.d"]   # note\n"y" = { p = 1, q = { r = "{s = 2}" } }\nz.w = [1, 2]\n[[e]]\nf = 1\n'
    lines = key_lines(text)
    assert lines[("a",)] == 1 and lines[("a", "x")] == 2
    assert lines[("b", "c.d")] == 3 and lines[("b", "c.d", "y")] == 4
    assert lines[("b", "c.d", "y", "p")] == lines[("b", "c.d", "y", "q", "r")] == 4
    assert ("b", "c.d", "y", "q", "s") not in lines  # braces inside a string are text
    assert lines[("b", "c.d", "z", "w")] == 5 and lines[("e", "f")] == 7


def test_an_unknown_agent_or_connector_lists_the_configured_ones_and_the_nearest(tmp_path: Path):
    config = load_config(write(tmp_path, GOOD))
    with pytest.raises(UsageError, match=r"agent 'other' is not configured in .*farm\.toml \(configured: target\)"):
        config.agent("other")
    with pytest.raises(UsageError, match=r"agent 'traget' is not configured in .*farm\.toml \(did you mean 'target'\?\) \(configured: target\)"):
        config.agent("traget")
    with pytest.raises(UsageError, match=r"connector 'x' is not configured in .* \(configured: llm\)"):
        config.connector("x")


def test_without_a_farm_toml_the_missing_file_is_said_as_the_cause():
    with pytest.raises(UsageError) as caught:
        FarmConfig().agent("expense")
    assert str(caught.value).startswith("no farm.toml in this folder (nor beside the input file or in its parents); agent 'expense' is not configured")


def test_the_key_is_read_from_the_environment_at_call_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    connector = load_config(write(tmp_path, GOOD)).connector("llm")
    monkeypatch.delenv("FARM_TEST_CONFIG_KEY", raising=False)
    assert connector.api_key() is None
    monkeypatch.setenv("FARM_TEST_CONFIG_KEY", "sk-later")
    assert connector.api_key() == "sk-later"


def test_a_key_with_a_stray_newline_is_a_usage_error_that_does_not_show_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = load_config(write(tmp_path, GOOD))
    monkeypatch.setenv("FARM_TEST_CONFIG_KEY", "sk-stray-secret\n")
    with pytest.raises(UsageError, match=r"farm\.toml:9: key 'api_key_env': \$FARM_TEST_CONFIG_KEY, the API key of connector 'llm', ends with") as caught:
        config.check_keys()
    assert "sk-stray-secret" not in str(caught.value)
    assert config.connector("llm").redacted()["api_key"] == "$FARM_TEST_CONFIG_KEY (set, with a stray newline or space)"


def test_safe_dump_holds_no_key_and_no_header_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FARM_TEST_CONFIG_KEY", "sk-never-written")
    dumped = load_config(write(tmp_path, GOOD)).safe_dump()
    text = json.dumps(dumped)
    assert "sk-never-written" not in text and "header-secret" not in text
    assert dumped["connectors"]["llm"]["api_key"] == "$FARM_TEST_CONFIG_KEY (set)"
    assert dumped["agents"]["target"]["description"] == "the one under test"


def test_find_config_prefers_the_explicit_path_then_the_working_folder_then_the_inputs_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    project = tmp_path / "project"
    (project / "suites" / "deep").mkdir(parents=True)
    beside = write(project, "")
    suite = project / "suites" / "deep" / "cases.jsonl"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert find_config(None, suite) == beside.resolve()
    assert find_config(None, None) is None
    assert find_config(str(beside), None) == beside
    own = write(elsewhere, "")
    assert find_config(None, suite) == Path("farm.toml")  # the working folder's, as a user writes it
    assert Path("farm.toml").resolve() == own.resolve()
    with pytest.raises(UsageError, match="--config: nope.toml does not exist"):
        find_config("nope.toml", suite)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[farm]\nresults_dir = "out\n', ":2:19: not valid TOML: key 'results_dir': a string is not closed on its line (end it with its quote)"),
        ("[farm]\ntraces = True\n", ":2:10: not valid TOML: key 'traces': write true in lower case, as TOML does"),
        ('a = 1\na = 2\n', ":2:6: not valid TOML: key 'a' is given twice (first at line 1); keep one"),
        ('[agents.a]\nresources.num_cpus = 1\nresources = {}\n', ":3:15: not valid TOML: key 'resources' is given twice in [agents.a] (first at line 2); keep one"),
        ('[agents."my a"]\nkind = "http"\n\n[agents."my a"]\n', ':4:15: not valid TOML: table [agents."my a"] is declared twice (first at line 1); write its keys under one header'),
        ("[farm]\nresults_dir = 'a\nsimulator = 'b'\n", ":2:17: not valid TOML: key 'results_dir': a string is not closed on its line (end it with its quote)"),
        ('[farm]\nresults_dir = "a\x01"\n', ":2:17: not valid TOML: key 'results_dir': a control character in a string: write it as the escape \\u0001"),
        ('[farm]\nresults_dir = "C:\\dir"\n', ":2:20: not valid TOML: a backslash in a \"string\" begins an escape: write \\\\, or put the text in 'single quotes'"),
        ("[farm]\nactors = [1, 2\n", ": not valid TOML: an array [...] is not closed with ] before the file ends"),
        ("[farm]\nactors = \n", ":2:10: not valid TOML: key 'actors': no value after '='"),
    ],
)
def test_a_file_that_is_not_toml_is_said_in_the_farms_words_with_line_and_column(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}{message}"


@pytest.mark.parametrize("key", ["content_path", "tool_calls_path", "awaiting_input_path", "input_hint_path"])
def test_every_jsonpath_of_an_http_agent_is_checked_as_the_file_loads(tmp_path: Path, key: str):
    path = write(tmp_path, f'[agents.h]\nkind = "http"\nurl = "http://127.0.0.1:9/chat"\n{key} = "$.a]"\n')
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert str(caught.value) == f"{path}:4: key '{key}': '$.a]' is not a JSONPath (at character 4)"


def test_an_http_agents_method_is_read_in_capitals_and_a_typo_named(tmp_path: Path):
    agent = load_config(write(tmp_path, '[agents.h]\nkind = "http"\nurl = "https://h.test/chat"\nmethod = "put"\n')).agent("h")
    assert agent.method == "PUT"
    with pytest.raises(UsageError, match=r":4: key 'method': 'PSOT' is not a method an http agent sends with: POST, PUT, PATCH, GET or DELETE \(did you mean 'POST'\?\)"):
        load_config(write(tmp_path, '[agents.h]\nkind = "http"\nurl = "https://h.test/chat"\nmethod = "PSOT"\n'))


RESOURCES = '[agents.heavy]\nkind = "python"\nentry = "m:f"\n'


def test_resources_are_read_in_rays_names_with_memory_as_a_size(tmp_path: Path):
    text = RESOURCES + 'concurrency = 2\nresources = { num_cpus = 1, num_gpus = 0.5, memory = "4GiB", custom = { "A100" = 1 } }\n'
    agent = load_config(write(tmp_path, text)).agent("heavy")
    assert agent.concurrency == 2 and agent.declares_resources
    assert agent.resources is not None
    assert agent.resources.ray_options() == {"num_cpus": 1, "num_gpus": 0.5, "memory": 4 * 2**30, "resources": {"A100": 1}}
    assert agent.resources.demand() == {"CPU": 1, "GPU": 0.5, "memory": 4 * 2**30, "A100": 1}
    assert not load_config(write(tmp_path, RESOURCES)).agent("heavy").declares_resources


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("resources = { num_gpus = 1.5 }", "key 'num_gpus': num_gpus above 1 must be a whole number"),
        ("resources = { num_cpus = -1 }", "key 'num_cpus': num_cpus must be a number of at least 0"),
        ('resources = { memory = "4 parsecs" }', "key 'memory': '4 parsecs' is not an amount of memory"),
        ("resources = { cpus = 1 }", "key 'cpus': unknown key (did you mean 'num_cpus'?)"),
        ("resources = { custom = { GPU = 1 } }", "key 'custom': 'GPU' is one of Ray's own resources"),
        ("concurrency = 0", "key 'concurrency': must be at least 1, not 0"),
    ],
)
def test_a_bad_resource_is_one_sentence_naming_the_line_and_key(tmp_path: Path, line: str, message: str):
    with pytest.raises(UsageError) as err:
        load_config(write(tmp_path, RESOURCES + line + "\n"))
    assert str(err.value).startswith(f"{tmp_path / 'farm.toml'}:4: {message}")
    assert "\n" not in str(err.value)
