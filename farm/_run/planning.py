""":func:`plan_run`, the phase between loading the cases and running them: it decides everything the
engine needs (the agents' connectors, ``parallel``, where results go and which are done, the
baseline, the engine, what ``run.json`` starts as) and says each mistake before anything runs.
A rescore is planned the same way, on the local engine, with its recorded turns replayed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm._run.closing import Say
from farm._run.phases import Planned
from farm.errors import UsageError

if TYPE_CHECKING:
    from farm._run.phases import Prepared
    from farm.conversation.golden import GoldenRecorder
    from farm.engines import Engine, RunPlan
    from farm.results import CaseRunKey
    from farm.sequential import Sequential
    from farm.traces.receiver import Receiver
    from farm.writers import RunInfo

__all__ = ["Planned", "plan_run"]


def plan_run(prepared: Prepared) -> Planned:
    """Decide everything the engine needs: the agents' connectors, ``parallel``, where results go and
    which are done (a resume), the baseline, the engine; each mistake said before anything runs."""
    from farm._run.gating import check_in_common, load_baseline

    options, cfg, suite = prepared.options, prepared.cfg, prepared.suite
    recorder = _golden(prepared)
    if options.interactive and prepared.rescoring is None and (options.skip_interactive or not sys.stdin.isatty()):
        raise UsageError("--interactive needs a terminal on stdin (and cannot be combined with --skip-interactive)")
    agent_id, agents = (prepared.agent_id, prepared.agents) if prepared.agent_id is not None else ("", [""])  # script tests
    connectors = _connectors(prepared, agents)
    jsonl, skip_keys = _results(prepared, agent_id)
    against = load_baseline(
        options.baseline, cfg.results_dir, options.inputs, prepared.run_dir
    )  # a bad one: said before anything runs
    info = _run_info(prepared, agent_id, agents, connectors)
    if against is not None and options.baseline != "last" and suite.feed.closed:  # every case of the run is known now
        check_in_common(options.baseline or "", against, info, ((c.source, c.id) for c in suite.cases))
    plan, engine = _engine_plan(prepared, agents, connectors, skip_keys)
    plan.sequential, plan.tried_before = _adaptive(prepared, jsonl, agent_id, bool(skip_keys))
    receiver = _receiver(prepared, agents, engine)
    if receiver is not None:
        for settings in plan.agent_settings.values():
            settings.trace_receiver = receiver.url
    hook_info: dict[str, Any] = {
        "input": options.input,
        "agent": agent_id,
        "agents": agents,
        "connector": connectors.get(agent_id),
        "run_id": prepared.run_id,
        "cases": suite.expected,
    }
    if prepared.rescoring is not None:
        hook_info["rescored_from"] = info.rescored_from
    return Planned(
        prepared, agent_id, agents, connectors, plan, info, engine, jsonl, skip_keys, recorder, against, hook_info, receiver
    )


def _receiver(prepared: Prepared, agents: list[str], engine: Engine) -> Receiver | None:
    """The OTLP receiver of a run whose remote agents' spans it captures (docs/traces.md), bound
    to ``[farm].trace_receiver`` (default: a free port on 127.0.0.1); None when none is needed."""
    cfg = prepared.cfg
    remote = [each for each in agents if each in cfg.agents and cfg.agents[each].kind in ("http", "openai")]
    if not remote or prepared.rescoring is not None:
        return None
    if not (
        cfg.farm.traces or any(case.traced for case in prepared.suite.cases)
    ):  # as the loader found them: no case is read again
        return None
    from farm.traces.receiver import Receiver

    address = cfg.farm.trace_receiver or "127.0.0.1:0"
    host, _, port = address.rpartition(":")
    try:
        return Receiver(engine.span_sink(prepared.run_id), host or "127.0.0.1", int(port), cfg.farm.max_trace_body)
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"[farm].trace_receiver {address}: the farm cannot listen there ({getattr(exc, 'strerror', None) or exc})"
        ) from None


def _golden(prepared: Prepared) -> GoldenRecorder | None:
    """The recorder of ``--update-golden``; else every case attached to its golden conversation."""
    from farm.conversation.golden import GoldenRecorder, attach, golden_folders

    options = prepared.options
    if options.update_golden is not None:  # recording replaces comparing, as a snapshot update does
        return GoldenRecorder(Path(options.update_golden), golden_folders(loaded.source for loaded in prepared.suite.cases))
    folder = Path(options.golden) if options.golden is not None else prepared.cfg.golden_dir
    attach(prepared.suite.cases, folder, every=options.golden is not None, input=options.input)
    return None


def _connectors(prepared: Prepared, agents: list[str]) -> dict[str, str | None]:
    """Per agent under test, its connector (``-c`` over the agent's own), each checked to be
    configured; a rescore's are those of the run it replays."""
    if prepared.rescoring is not None:
        source = prepared.rescoring.info
        return dict(source.connectors) or {agent: source.connector for agent in agents}
    cfg, override = prepared.cfg, prepared.options.connector
    connectors = {each: override or (cfg.agent(each).connector if each else None) for each in agents}
    for name in connectors.values():
        if name:
            cfg.connector(name)  # fail early, naming the configured connectors
    return connectors


def _results(prepared: Prepared, agent_id: str) -> tuple[Path, set[CaseRunKey]]:
    """The results JSONL, and (a resume) the case runs it has finished: those left out of this part."""
    from farm.results._folder import RESULTS_JSONL, finished_keys
    from farm.writers.jsonl import BROKEN

    options = prepared.options
    jsonl = Path(options.output) if options.output else prepared.run_dir / RESULTS_JSONL
    resumed = options.resume is not None and jsonl.exists()
    if options.retry_errors and not resumed:
        raise UsageError("--retry-errors: give it with --resume RUN_DIR, the run whose errors and timeouts to run again")
    if not resumed:
        return jsonl, set()
    match = _suite_matcher(prepared)
    return jsonl, {
        key._replace(suite=match(key.suite))
        for key in finished_keys(jsonl, agent_id, unless=BROKEN if options.retry_errors else ())
    }


def _suite_matcher(prepared: Prepared) -> Callable[[str], str]:
    """An earlier part's suite as this part names it (a resume from another folder reads the suite
    files by another path: :func:`~farm.results._suites.same_suite`)."""
    from farm.results._suites import suite_matcher, suite_of

    return suite_matcher({suite_of(loaded.source) for loaded in prepared.suite.cases})


def _adaptive(
    prepared: Prepared, jsonl: Path, agent_id: str, resumed: bool
) -> tuple[Sequential | None, dict[CaseRunKey, tuple[str, bool]]]:
    """Under adaptive repeats, the rule that stops each case, and (a resume) how the tries already
    run ended, which it counts on from."""
    from farm.results._folder import finished_tries
    from farm.sequential import Runs, Sequential
    from farm.writers.jsonl import BROKEN

    options = prepared.options
    runs = options.runs
    if not (isinstance(runs, Runs) and runs.adaptive):
        return None, {}
    rule = Sequential(options.min_pass_rate, runs.least, int(runs), options.alpha, options.delta)
    if not resumed:
        return rule, {}
    match = _suite_matcher(prepared)
    tries = finished_tries(jsonl, agent_id, unless=BROKEN if options.retry_errors else ())
    return rule, {key._replace(suite=match(key.suite)): ended for key, ended in tries.items()}


def _parallel(prepared: Prepared, connectors: dict[str, str | None]) -> int:
    """``--parallel``, else (a resume) the run's own, else the connectors' limits summed
    (:mod:`farm.ratelimit`); a rescore, which calls no agent, the default."""
    from farm.ratelimit import DEFAULT_PARALLEL, default_parallel

    given, cfg = prepared.options.parallel, prepared.cfg
    if given or prepared.rescoring is not None:
        return given or DEFAULT_PARALLEL
    return sum(
        default_parallel(cfg.connectors[name]) if name else DEFAULT_PARALLEL for name in dict.fromkeys(connectors.values())
    )


def _engine_plan(
    prepared: Prepared, agents: list[str], connectors: dict[str, str | None], skip_keys: set[CaseRunKey]
) -> tuple[RunPlan, Engine]:
    """The run's plan and its engine (``auto`` chosen by the run's size); a cluster not there is said here."""
    from farm._run.setup import build_plan
    from farm.engines import Terminal, choose_engine, make_engine

    options, cfg, suite, rescoring = prepared.options, prepared.cfg, prepared.suite, prepared.rescoring
    engine_name = choose_engine(
        options.engine,
        address=options.address,
        conversations=suite.expected * options.runs * len(agents) - len(skip_keys),
        resources=any(cfg.agents[each].declares_resources for each in agents if each in cfg.agents),
    )
    terminal = Terminal(sys.stdin, Say(prepared.view.console)) if options.interactive and rescoring is None else None
    fields = {
        "parallel": _parallel(prepared, connectors),
        "runs": options.runs,
        "skip_keys": skip_keys,
        "terminal": terminal,
        "driver_calls": prepared.driver_calls,
    }
    plan = build_plan(cfg, agents, suite, options, prepared.run_id, replay=rescoring.replay if rescoring else None, **fields)
    engine = make_engine(
        engine_name, **({"address": options.address} if engine_name == "ray" else {})
    )  # a cluster not there: said before anything runs
    return plan, engine


def _run_info(prepared: Prepared, agent_id: str, agents: list[str], connectors: dict[str, str | None]) -> RunInfo:
    """What ``run.json`` starts as; a rescore's names the run it replays."""
    from farm.writers import RunInfo

    options, previous, rescoring = prepared.options, prepared.previous, prepared.rescoring
    return RunInfo(
        run_id=prepared.run_id,
        command=options.command or ["farm.run", *options.inputs],
        input=options.input,
        inputs=list(options.inputs),
        cwd=str(Path.cwd()),
        agent=agent_id,
        agents=agents,
        connector=connectors.get(agent_id),
        connectors=connectors,
        config=prepared.cfg.safe_dump(),
        options=options.recorded,
        generation=prepared.suite.feed.record(previous),
        parts=previous.recorded_parts() if previous is not None else [],
        rescored_from={"run_id": rescoring.source_id, "run_dir": str(rescoring.source)} if rescoring else None,
    )
