"""Every option of a run has one row in one table (farm._run.request.OPTIONS): ``farm test``'s
flags and ``farm.run``'s keywords are its rows, none of them restates a default, and each value
comes from the first of: given, the resumed run's, ``[farm]``, the default."""

import inspect
from dataclasses import FrozenInstanceError, fields

import pytest
import typer
from farm.cli.app import app

import farm
from farm._run.request import ALIASES, OPTIONS, RunRequest, resolve
from farm.config import FarmConfig, FarmSettings
from farm.errors import UsageError
from farm.writers.runinfo import RunInfo, RunOptions


def test_every_farm_run_keyword_is_one_row_of_the_table_with_no_default_of_its_own():
    keywords = inspect.signature(farm.run).parameters
    assert set(OPTIONS) == {each.name for each in fields(RunRequest)} == set(keywords) - set(ALIASES)
    for name, keyword in keywords.items():
        assert keyword.default is None, f"farm.run's {name} restates a default"
    for cli_name, option in ALIASES.items():
        assert option in OPTIONS and OPTIONS[option].flag == f"--{cli_name}"


def test_every_farm_test_option_is_one_row_of_the_table_and_restates_no_default():
    command = typer.main.get_command(app).commands["test"]  # type: ignore[attr-defined]
    by_flag = {option.flag: name for name, option in OPTIONS.items() if option.flag is not None}
    seen = set()
    for param in command.params:
        (flag,) = [each for each in param.opts if each.startswith("--")]
        assert flag in by_flag, f"farm test {flag} is not in the table"
        assert param.default is None, f"farm test {flag} restates a default"
        seen.add(flag)
    assert seen == set(by_flag), "a row names a flag farm test does not have"


def _everything_recorded() -> RunInfo:
    """A resumed run that recorded a value for every option it can."""
    options = RunOptions(
        timeout=7, turn_timeout=3, on_missing_input="fail", simulator="sim-run", match="^a", tags=["t"], connector="c-run",
        golden="g-run", update_golden="u-run", retries=2, max_cost=5.0, min_pass_rate=0.5, baseline="last",
        attribute=True, simulator_failures="error",
    )  # fmt: skip
    return RunInfo(run_id="r", input="suite.jsonl", agent="a1", agents=["a1", "a2"], engine="ray", results="out.jsonl", runs=3, parallel=9, options=options)


def _everything_set() -> FarmConfig:
    farm_settings = FarmSettings(
        default_agent="a-farm", engine="local", simulator="sim-farm", max_cost=9.0, min_pass_rate=0.25, attribute=False, simulator_failures="failure"
    )
    return FarmConfig(farm=farm_settings)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_each_option_takes_the_first_of_given_resumed_farm_default(name: str):
    option = OPTIONS[name]
    previous, config = _everything_recorded(), _everything_set()
    base = RunRequest(input="given.jsonl")
    nothing = resolve(base, None, FarmConfig())
    resumed = resolve(base, previous, FarmConfig())
    from_farm = resolve(base, None, config)
    if name == "input":
        assert nothing.inputs == resumed.inputs == from_farm.inputs == ("given.jsonl",)
        return
    if name == "agent":  # resolved as the list of agents under test
        assert (nothing.agents, resumed.agents, from_farm.agents) == ([], ["a1", "a2"], ["a-farm"])
        return
    farm_value = getattr(config.farm, option.farm) if option.farm else None
    resumed_value = option.resumed(previous) if option.resumed else None
    assert getattr(nothing, name) == option.default
    assert getattr(resumed, name) == (resumed_value if resumed_value is not None else option.default)
    assert getattr(from_farm, name) == (farm_value if farm_value is not None else option.default)
    if option.resumed and option.farm:
        assert getattr(resolve(base, previous, config), name) == resumed_value  # the run's own beats [farm]


def test_the_resolved_options_are_the_table_s_rows_frozen_and_typed():
    resolved = resolve(RunRequest(input="x"), None, FarmConfig())
    names = {each.name for each in fields(resolved)} - {"given", "sources"}
    assert names == (set(OPTIONS) - {"input", "agent"}) | {"inputs", "agents"}
    with pytest.raises(FrozenInstanceError):
        resolved.runs = 2  # type: ignore[misc]
    defaults = {name: getattr(resolved, name) for name, option in OPTIONS.items() if option.default is not None}
    assert None not in defaults.values()  # an option with a default is never None once resolved
    assert (resolved.fail_fast, resolved.cache, resolved.retries, resolved.tags) == (False, True, 0, ())


def test_the_table_s_values_reach_what_run_json_records():
    previous = _everything_recorded()
    resolved = resolve(RunRequest(input="given.jsonl", timeout="2m", retries=0), previous, _everything_set())
    assert resolved.recorded.timeout == 120.0 and resolved.recorded.retries == 0  # given, even when 0
    assert resolved.recorded.turn_timeout == 3.0 and resolved.recorded.simulator == "sim-run" and resolved.recorded.min_pass_rate == 0.5
    assert resolved.agents == ["a1", "a2"] and resolved.runs == 3 and resolved.engine == "ray"
    plain = resolve(RunRequest(input="x"), None, FarmConfig())
    assert plain.recorded.timeout == 300.0 and plain.recorded.on_missing_input == "skip" and plain.recorded.cache is True
    assert plain.agents == [] and plain.runs == 1 and plain.engine == "auto"


def test_a_bad_value_names_the_place_it_came_from():
    config = FarmConfig(farm=FarmSettings(min_pass_rate=0.25))
    bad = RunInfo(run_id="r", options=RunOptions(min_pass_rate=1.5))
    with pytest.raises(UsageError, match=r"run.json's options.min_pass_rate"):
        resolve(RunRequest(input="x"), bad, config)
    with pytest.raises(UsageError, match=r"--runs: 0 is not a positive number"):
        resolve(RunRequest(input="x", runs=0), None, config)
    with pytest.raises(UsageError, match=r"--on-missing-input: 'never' is not one of: skip, fail"):
        resolve(RunRequest(input="x", on_missing_input="never"), None, config)


def test_every_extra_writer_is_an_option_of_a_run_and_of_a_rescore():
    from farm.writers.extra import EXTRA_WRITERS

    rescore = inspect.signature(farm.rescore).parameters
    for writer in EXTRA_WRITERS:
        assert writer.keyword in OPTIONS and writer.keyword in rescore, writer.keyword
        assert rescore[writer.keyword].default is None


def test_an_empty_agent_list_names_no_agent():
    config = FarmConfig(farm=FarmSettings(default_agent="a-farm"))
    for empty in ([], ""):
        assert resolve(RunRequest.of({"input": "x", "agent": empty}), None, config).agents == ["a-farm"]
    assert resolve(RunRequest.of({"input": "x", "name": ["b", "c"]}), None, config).agents == ["b", "c"]


def test_an_empty_string_is_no_value():
    previous = _everything_recorded()
    resolved = resolve(RunRequest(input="", simulator="", timeout=""), previous, FarmConfig())
    assert resolved.input == "suite.jsonl" and resolved.simulator == "sim-run" and resolved.timeout == 7.0


def test_every_farm_test_option_reaches_farm_run_under_its_row(monkeypatch: pytest.MonkeyPatch):
    """Each flag of ``farm test``, given, arrives at :func:`farm.run` as its row's keyword: a flag
    the command forgets to pass on fails here, named."""
    from typer.testing import CliRunner

    seen: dict = {}

    def fake_run(input=None, **keywords):
        seen.update(keywords, input=input)
        raise typer.Exit(0)

    monkeypatch.setattr(farm, "run", fake_run)
    command = typer.main.get_command(app).commands["test"]  # type: ignore[attr-defined]
    by_flag = {option.flag: name for name, option in OPTIONS.items() if option.flag is not None}
    for param in command.params:
        (flag,) = [each for each in param.opts if each.startswith("--")]
        value = [] if param.is_flag else ["0.5" if flag in ("--min-pass-rate", "--max-cost") else "3"]
        seen.clear()
        result = CliRunner().invoke(app, ["test", flag, *value], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        name = by_flag[flag]
        assert seen.get(name) not in (None, [], ""), f"farm test {flag} does not reach farm.run({name}=...)"


def test_run_json_records_every_option_it_has_a_field_for_as_resolved():
    resolved = resolve(RunRequest(input="x"), _everything_recorded(), _everything_set())
    recorded = resolved.recorded
    for name in RunOptions.model_fields:
        value = getattr(resolved, name)
        assert getattr(recorded, name) == (list(value) if isinstance(value, tuple) else value), f"run.json's options.{name}"
