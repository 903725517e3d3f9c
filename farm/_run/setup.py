"""What :func:`farm.run` and :func:`farm.rescore` build before a run starts: the config,
the agent under test and the selected cases; and the runner's settings from the run's options.

Both calls resolve their options into a :class:`~farm.writers.runinfo.RunOptions` (what
``run.json`` records), and :func:`run_settings` turns that into the runner's
:class:`~farm.conversation.runner.RunSettings`, so a run, its resume and its rescore shape their
conversations the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from farm.durations import parse_duration
from farm.errors import UsageError

if TYPE_CHECKING:
    from farm._run.execution import RunOutputs
    from farm._run.result import RunResult
    from farm._run.view import RunView
    from farm.config import FarmConfig, FarmSettings
    from farm.conversation.settings import RunSettings
    from farm.engines import Engine, RunPlan
    from farm.results import CaseResult
    from farm.suite.loader import Suite
    from farm.summary import Summary
    from farm.writers.runinfo import RunInfo, RunOptions

__all__ = [
    "build_plan",
    "execute_viewed",
    "farm_config",
    "prepare",
    "recorded_config",
    "recorded_input",
    "resolve_options",
    "run_settings",
    "selection",
    "seconds",
]



def seconds(flag: str, value: str | float) -> float:
    """``value`` (``30s``, ``2m`` or a number) in seconds; a bad one is a usage error naming ``flag``."""
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def farm_config(config: str | Path | FarmConfig | None, input: str) -> FarmConfig:
    """``config`` itself, else the ``farm.toml`` it names, else the one found from ``input``."""
    from farm.config import FarmConfig, find_config, load_config
    from farm.suite.inputs import input_path

    if isinstance(config, FarmConfig):
        return config
    return load_config(find_config(str(config) if config is not None else None, input_path(input)))


def prepare(
    input: str,
    agent: str | None,
    config: str | Path | FarmConfig | None,
    match: str | None,
    tags: list[str] | None,
    dry_run: bool,
    cache: bool = True,
) -> tuple[FarmConfig, str | None, Suite]:
    """The config, the agent under test and the selected cases."""
    from farm.suite.inputs import resolve_input

    cfg = farm_config(config, input)
    agent_id = agent or cfg.farm.default_agent
    if agent_id is None and not dry_run and not input.startswith("scripts."):
        if cfg.path is None:
            from farm.config import NO_CONFIG

            raise UsageError(f"{NO_CONFIG}, so no agent to test: write one (with [farm].default_agent), or give --config PATH")
        raise UsageError("no agent to test: give -n/--name or set [farm].default_agent in farm.toml")
    if agent_id is not None and not dry_run:
        cfg.agent(agent_id)  # fail early, naming the configured agents
    from farm.roles.cache import RoleCache

    role_cache = RoleCache.for_config(cfg) if cache else None
    suite = resolve_input(input, cfg, agent_id, compact=not dry_run, cache=role_cache).select(match, tags or [])
    return cfg, agent_id, suite


def check_budget(cfg: FarmConfig, max_cost: float | None) -> None:
    """A budget needs a price to count against: with no connector priced, every cost is unknown and
    ``--max-cost`` would never stop the run, so it is a :class:`UsageError` before anything is sent."""
    if max_cost is None or any(c.price is not None for c in cfg.connectors.values()):
        return
    where = f"in {cfg.path}" if cfg.path else "configured"
    raise UsageError(
        f"--max-cost ${max_cost:g}: no connector {where} has a price, so no cost can be counted; "
        "give the connectors a price (price = { input = ..., output = ... }) or drop --max-cost"
    )


def resolve_options(
    previous: RunInfo | None,
    farm: FarmSettings,
    *,
    timeout: str | float | None = None,
    turn_timeout: str | float | None = None,
    on_missing_input: str | None = None,
    simulator: str | None = None,
    match: str | None = None,
    tags: list[str] | None = None,
    connector: str | None = None,
    retries: int | None = None,
    golden: str | Path | None = None,
    update_golden: str | Path | None = None,
    max_cost: float | None = None,
    fail_fast: bool = False,
    interactive: bool = False,
    cache: bool = True,
    min_pass_rate: float | None = None,
    baseline: str | None = None,
) -> RunOptions:
    """The run's options, each resolved once, here and nowhere else: the value given, else the
    resumed run's own (``previous``), else the farm's (``[farm]``), else the default. A value that
    cannot be is a :class:`~farm.errors.UsageError` naming its flag."""
    from farm.conversation.settings import DEFAULT_CASE_TIMEOUT, DEFAULT_TURN_TIMEOUT
    from farm.writers.runinfo import RunOptions

    earlier = previous.options if previous is not None else RunOptions()
    on_missing = on_missing_input or earlier.on_missing_input or "skip"
    if on_missing not in ("skip", "fail"):
        raise UsageError(f"--on-missing-input: '{on_missing}' is not one of: skip, fail")
    retries = retries if retries is not None else earlier.retries or 0
    if retries < 0:
        raise UsageError(f"--retries: {retries} is not 0 or more")
    max_cost = next((c for c in (max_cost, earlier.max_cost, farm.max_cost) if c is not None), None)
    if max_cost is not None and not (math.isfinite(max_cost) and max_cost > 0):
        raise UsageError(f"--max-cost: {max_cost} is not a positive amount of USD")
    from farm.gate import DEFAULT_MIN_PASS_RATE, check_min_pass_rate

    rates = (("--min-pass-rate", min_pass_rate), ("run.json's options.min_pass_rate", earlier.min_pass_rate), ("farm.toml: [farm].min_pass_rate", farm.min_pass_rate))
    where, min_pass_rate = next(((name, r) for name, r in rates if r is not None), ("", DEFAULT_MIN_PASS_RATE))
    golden = golden or earlier.golden
    update_golden = update_golden or earlier.update_golden
    return RunOptions(
        timeout=seconds("--timeout", timeout or earlier.timeout or DEFAULT_CASE_TIMEOUT),
        turn_timeout=seconds("--turn-timeout", turn_timeout or earlier.turn_timeout or DEFAULT_TURN_TIMEOUT),
        on_missing_input=on_missing,  # type: ignore[arg-type]  # checked above
        simulator=simulator or earlier.simulator or farm.simulator,
        fail_fast=fail_fast,
        match=match,
        tags=list(tags or []),
        interactive=interactive,
        connector=connector or earlier.connector,
        golden=str(golden) if golden is not None else None,
        update_golden=str(update_golden) if update_golden is not None else None,
        retries=retries,
        cache=cache,
        max_cost=max_cost,
        min_pass_rate=check_min_pass_rate(min_pass_rate, where),
        baseline=baseline or earlier.baseline,
    )


def selection(previous: RunInfo | None, match: str | None, tags: list[str] | None) -> tuple[str | None, list[str] | None]:
    """``(match, tags)``: the cases to run, as given, else (a resume, a rescore) the run's own."""
    if previous is None:
        return match, tags
    return (match if match is not None else previous.options.match, tags if tags is not None else list(previous.options.tags or []) or None)


def run_settings(cfg: FarmConfig, agent_id: str, run_id: str, options: RunOptions) -> RunSettings:
    """The runner's settings for a run of ``agent_id`` with ``options`` (as :func:`resolve_options`
    made them); the agent's own ``input_tools``, ``tool_mocks`` and ``max_tool_steps``."""
    from farm.config import AgentConfig
    from farm.conversation.settings import RunSettings

    if options.timeout is None or options.turn_timeout is None:
        raise ValueError("run_settings needs options from resolve_options")
    target = cfg.agent(agent_id) if agent_id else AgentConfig(kind="python")  # script tests: no agent under test
    return RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=options.on_missing_input or "skip",
        case_timeout=options.timeout,
        turn_timeout=options.turn_timeout,
        interactive=bool(options.interactive),
        default_simulator=options.simulator,
        input_tools=tuple(target.input_tools),
        agent_tool_mocks=dict(target.tool_mocks),
        max_tool_steps=target.max_tool_steps,
        cache=options.cache is not False,
    )


def build_plan(cfg: FarmConfig, agents: list[str], suite: Suite, options: RunOptions, run_id: str, **fields: Any) -> RunPlan:
    """The plan of a run of ``suite`` on ``agents`` with ``options``; ``fields``: the rest of
    :class:`~farm.engines.RunPlan` (``parallel``, ``runs``, ``skip_keys``, ``replay``, ...)."""
    from farm.engines import RunPlan

    agent_settings = {agent: run_settings(cfg, agent, run_id, options) for agent in agents}
    return RunPlan(
        config=cfg,
        cases=suite.cases,
        settings=agent_settings[agents[0]],
        agent_settings=agent_settings,
        fail_fast=bool(options.fail_fast),
        retries=options.retries or 0,
        max_cost=options.max_cost,
        connector_override=options.connector,
        actors=cfg.farm.actors,
        **fields,
    )


def execute_viewed(
    plan: RunPlan,
    outputs: RunOutputs,
    engine: Engine,
    info: RunInfo,
    view: RunView,
    on_result: Callable[[CaseResult], None],
    resume: str | None,
) -> Summary | RunResult:
    """Run ``plan`` (:func:`farm._run.execution.execute`) under ``view``; the run's :class:`Summary`, or,
    when an interrupt or a lost engine ended it early, the :class:`RunResult` to return, the
    console having said so with ``resume`` (the command that finishes it)."""
    from farm._run.execution import RunInterrupted, RunStopped, execute, interrupts_ignored
    from farm._run.result import RunResult

    try:
        return execute(plan, outputs, engine, info=info, on_result=on_result, on_phase=view.phase)
    except RunInterrupted as stop:
        if isinstance(stop, RunStopped):  # the engine went away: no case's fault
            view.stop()
            view.console.print(
                f"\n[red]error:[/red] {stop.reason}: {stop.done} of {stop.total} case runs finished, results kept; resume with: {escape(resume or '')}",
                soft_wrap=True,
            )
            return RunResult(1, outputs.run_dir, outputs.jsonl, stop.summary, engine.name, info.run_id, interrupted=True)
        with interrupts_ignored():  # a second Ctrl-C must not cut the resume command off
            view.interrupted(stop, "rescored" if plan.replay is not None else "finished", resume=resume)
        return RunResult(130, outputs.run_dir, outputs.jsonl, stop.summary, engine.name, info.run_id, interrupted=True)


def recorded_input(info: RunInfo) -> str | None:
    """The input a run was started with, found from here: a relative suite file resolves against
    the folder the run started in (``info.cwd``; for a run that did not record it, the folder of
    its ``farm.toml``) when it is not beside us."""
    from farm.suite.inputs import input_path

    value = info.input
    path = input_path(value) if value else None
    if value is None or path is None or path.is_absolute() or path.exists():
        return value
    config_path = info.config.get("path")
    for folder in (info.cwd, str(Path(config_path).parent) if config_path else None):
        if folder and (Path(folder) / path).exists():
            return str(Path(folder) / path)
    return value


def recorded_config(info: RunInfo) -> Path | None:
    """The ``farm.toml`` a run used, when it is still there."""
    path = info.config.get("path")
    return Path(path) if path and Path(path).is_file() else None
