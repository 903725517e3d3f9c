"""What :func:`farm.run` and :func:`farm.rescore` build before a run starts: the agent under
test and the selected cases (the config is located with the options,
:func:`farm._run.request.farm_config`); and the runner's settings from the run's options.

Both calls resolve their options (:func:`farm._run.request.resolve`) into a
:class:`~farm._run.request.ResolvedOptions`, and :func:`run_settings` turns that into the runner's
:class:`~farm.conversation.runner.RunSettings`, so a run, its resume and its rescore shape their
conversations the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from farm.errors import UsageError

if TYPE_CHECKING:
    from farm._run.execution import RunOutputs
    from farm._run.request import ResolvedOptions
    from farm._run.result import RunResult
    from farm._run.view import RunView
    from farm.config import FarmConfig
    from farm.conversation.settings import RunSettings
    from farm.engines import Engine, RunPlan
    from farm.results import CaseResult
    from farm.suite.loader import Suite
    from farm.summary import Summary
    from farm.writers.runinfo import RunInfo

__all__ = ["build_plan", "check_outputs", "check_resume", "execute_viewed", "prepare", "run_settings"]


def prepare(
    cfg: FarmConfig,
    inputs: Sequence[str],
    agent_id: str | None,
    match: str | None,
    tags: Sequence[str],
    dry_run: bool,
    cache: bool = True,
    simulator: str | None = None,
) -> Suite:
    """The selected cases of ``inputs``, for ``agent_id`` (the first agent under test), checked to be
    configured; ``simulator``: the run's default one (``--simulator``)."""
    from farm.inputs import expand_inputs, load_inputs

    expanded = expand_inputs(inputs)  # a mistyped path is said first: it is why no agent would be tested
    if agent_id is None and not dry_run and not any(each.kind == "script-tests" for each in expanded):
        if cfg.path is None:
            from farm.config import NO_CONFIG

            raise UsageError(
                f"{NO_CONFIG}, so no agent to test: write one (with [farm].default_agent), give --config PATH, or run `farm init` for a starter project"
            )
        raise UsageError("no agent to test: give -n/--name or set [farm].default_agent in farm.toml")
    if agent_id is not None and not dry_run:
        cfg.agent(agent_id)  # fail early, naming the configured agents
    from farm.roles.cache import RoleCache

    role_cache = RoleCache.for_config(cfg) if cache else None
    return load_inputs(expanded, cfg, agent_id, compact=not dry_run, cache=role_cache, simulator=simulator).select(match, tags)


def check_resume(resume: str | Path | None) -> None:
    """``--resume``'s value, before its ``run.json`` is read: a run folder, not a file."""
    if resume is not None and Path(resume).is_file():
        raise UsageError(
            f"--resume {resume}: {resume} is a file; --resume takes the run folder to continue (e.g. farm-results/<run_id>)"
        )


def check_outputs(options: ResolvedOptions, results_dir: Path) -> None:
    """Every path the run will write, checked before anything runs (a case, a generator, an agent):
    ``-o``, ``--junit``, ``--html``, ``--update-golden``, the run's folder (``--resume``'s, else one in
    ``results_dir``). A folder given where a file goes, a file in the way of a folder, a folder
    that cannot be written in: a :class:`UsageError` naming the option and its value. A dry run
    writes its cases to ``-o`` alone."""
    from farm.files import blocked
    from farm.results._folder import RESULTS_JSONL

    dry = options.dry_run
    files = [("-o/--output", options.given.output if dry else options.output, RESULTS_JSONL)]
    folders: list[tuple[str, str | Path | None]] = []
    if not dry:
        files += [("--junit", options.junit, "junit.xml"), ("--html", options.html, "report.html")]
        folders += [("--update-golden", options.update_golden)]
        folders += [("--resume", options.resume) if options.resume is not None else ("[farm].results_dir", results_dir)]
    for flag, value, example in files:
        if value is not None and (problem := blocked(Path(value), example=example)):
            raise UsageError(f"{flag} {value}: {problem}")
    for flag, value in folders:
        if value is not None and (problem := blocked(Path(value), folder=True)):
            raise UsageError(f"{flag} {value}: {problem}")


def run_settings(cfg: FarmConfig, agent_id: str, run_id: str, options: ResolvedOptions) -> RunSettings:
    """The runner's settings for a run of ``agent_id`` with ``options``; the agent's own
    ``input_tools``, ``tool_mocks`` and ``max_tool_steps``."""
    from farm.config import AgentConfig
    from farm.conversation.settings import RunSettings

    target = cfg.agent(agent_id) if agent_id else AgentConfig(kind="python")  # script tests: no agent under test
    return RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=options.on_missing_input,
        case_timeout=options.timeout,
        turn_timeout=options.turn_timeout,
        interactive=options.interactive,
        default_simulator=options.simulator,
        input_tools=tuple(target.input_tools),
        agent_tool_mocks=dict(target.tool_mocks),
        max_tool_steps=target.max_tool_steps,
        cache=options.cache,
        traces=cfg.farm.traces,
        max_spans=cfg.farm.max_spans,
        exported=bool(getattr(options, "otlp", None)),
        simulator_failures=options.simulator_failures,
        attribute=options.attribute,
        attributor=_attributor(cfg, options.attribute),
    )


def _attributor(cfg: FarmConfig, attribute: bool) -> str | None:
    """``[farm].attributor``, checked before any agent is called when ``--attribute`` asks for it."""
    from farm.errors import UsageError

    name = cfg.farm.attributor
    if not attribute:
        return name
    if not name:
        raise UsageError("--attribute: no attributor to ask; set [farm].attributor to a validator-kind agent")
    cfg.agent(name)  # a UsageError naming the configured agents
    return name


def build_plan(cfg: FarmConfig, agents: list[str], suite: Suite, options: ResolvedOptions, run_id: str, **fields: Any) -> RunPlan:
    """The plan of a run of ``suite`` on ``agents`` with ``options``; ``fields``: the rest of
    :class:`~farm.engines.RunPlan` (``parallel``, ``runs``, ``skip_keys``, ``replay``, ...)."""
    from farm.engines import RunPlan

    agent_settings = {agent: run_settings(cfg, agent, run_id, options) for agent in agents}
    return RunPlan(
        config=cfg,
        cases=suite.cases,
        feed=suite.feed,
        settings=agent_settings[agents[0]],
        agent_settings=agent_settings,
        fail_fast=options.fail_fast,
        retries=options.retries,
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
    from farm._run.execution import RunInterrupted, RunStopped, execute
    from farm._run.result import RunResult
    from farm.interrupts import interrupts_ignored

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
