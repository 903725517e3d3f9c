""":func:`farm.run`'s phases after its options are resolved (:mod:`farm._run.request`):
:func:`prepare_run` loads and checks the cases, :func:`plan_run` decides everything the engine
needs, :func:`execute_run` runs it under the console and says how it went. Each phase hands the
next one record (:class:`Prepared`, :class:`Planned`); nothing runs before the last.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from farm._run.closing import (
    Reach,
    Say,
    agent_report,
    count_after_run,
    global_hook,
    remove_run,
    resume_command,
    say_stopped,
    show_dry_run,
)
from farm._run.generating import GenerationShown, generate, generated, generation_record, generator_calls
from farm._run.request import ResolvedOptions
from farm._run.result import RunResult, new_run_id
from farm.errors import InputError, UsageError
from farm.suite.loader import MESSAGE

if TYPE_CHECKING:
    from farm._run.execution import RunOutputs
    from farm._run.view import RunView
    from farm.config import FarmConfig
    from farm.conversation.golden import GoldenRecorder
    from farm.engines import Engine, RunPlan
    from farm.gate import Baseline
    from farm.results import CaseResult
    from farm.roles.cache import CallTally
    from farm.suite.loader import Suite
    from farm.summary import Summary
    from farm.writers import RunInfo
    from farm.writers.extra import ReportFile

__all__ = ["Planned", "Prepared", "dry_run", "execute_run", "plan_run", "prepare_run"]


@dataclass
class Prepared:
    """A run's cases, loaded and checked, and where it goes: what :func:`plan_run` starts from."""

    options: ResolvedOptions
    cfg: FarmConfig
    previous: RunInfo | None
    agent_id: str | None
    """The first agent under test; None: script tests, which call agents themselves."""
    agents: list[str]
    suite: Suite
    view: RunView
    run_id: str
    run_dir: Path
    driver_calls: CallTally


@dataclass
class Planned:
    """Everything a run needs, decided: what :func:`execute_run` runs."""

    prepared: Prepared
    agent_id: str
    agents: list[str]
    connectors: dict[str, str | None]
    plan: RunPlan
    info: RunInfo
    engine: Engine
    jsonl: Path
    skip_keys: set[tuple[str, int, str]]
    recorder: GoldenRecorder | None
    against: Baseline | None
    """The baseline run the gate compares with (``--baseline``)."""
    hook_info: dict[str, Any]
    """What the hooks, the reporter and the writers' heads are told of the run."""


def _budget_source(options: ResolvedOptions) -> str:
    """Where the run's budget came from, as its error names it: the flag, the resumed run, or ``[farm]``."""
    source = options.sources.get("max_cost", "")
    if source.startswith("run.json"):
        return "the resumed run's --max-cost"
    return "--max-cost" if source.startswith("--") else "[farm].max_cost"


def prepare_run(options: ResolvedOptions, cfg: FarmConfig, previous: RunInfo | None) -> Prepared:
    """Load the selected cases (a generator's calls counted for the run) and check everything that
    needs no agent call (SPEC 2); the run's id, folder and console."""
    from farm._run.setup import prepare
    from farm._run.view import RunView
    from farm.roles.cache import tally
    from farm.suite.checks import check_before_run

    agents = options.agents
    agent_id = agents[0] if agents else None
    dry = options.dry_run
    with tally() as driver_calls:  # a generator's call, before the run
        suite = prepare(cfg, options.inputs, agent_id, options.match, options.tags, dry, options.cache)
    budget, budget_from = options.max_cost, _budget_source(options)
    check_before_run(suite, cfg, agents, simulator=options.simulator, connector=options.connector, max_cost=budget, max_cost_from=budget_from, dry_run=dry)
    if suite.problems and suite.stream is None and not dry:  # as pytest stops on a collection error
        raise InputError(suite.problems)
    view = RunView(options.console, json_events=options.json_events, quiet=options.quiet, verbose=options.verbose)
    run_id = (previous.run_id if previous else None) or new_run_id()
    run_dir = Path(options.resume) if options.resume is not None else cfg.results_dir / run_id
    prepared = Prepared(options, cfg, previous, agent_id, agents, suite, view, run_id, run_dir, driver_calls)
    if suite.stream is not None:  # generated cases: they run as their batches arrive (farm.roles.generation)
        suite.stream.default_simulator = options.simulator
        if not dry:
            _open_stream(prepared)
    return prepared


def _open_stream(prepared: Prepared) -> None:
    """Start a generation that streams into the run: a resumed run's cases first, the selection kept."""
    from farm.agents.transport import preload
    from farm.suite.loader import Suite

    options, stream = prepared.options, prepared.suite.stream
    assert stream is not None
    preload()  # the generator's first request would import the HTTP transport inside the run
    prepared.suite.cases = Suite(stream.open(prepared.run_dir)).select(options.match, options.tags).cases  # a resumed run's
    if options.match or options.tags:
        stream.keep = lambda cases: Suite(cases).select(options.match, options.tags).cases


def dry_run(prepared: Prepared) -> RunResult:
    """``--dry-run``: the cases (generated here, when a generator makes them) printed, and written with ``-o``."""
    options, view = prepared.options, prepared.view
    if prepared.suite.stream is not None:  # the generation alone
        try:
            generate(prepared.suite, prepared.cfg, options.cache, view.console, options.quiet, options.match, options.tags)
        except KeyboardInterrupt:
            return RunResult(130, interrupted=True)
    given = prepared.options.given.output  # -o alone: a resumed run's results file is not where its cases go
    output = Path(given) if given else None
    return RunResult(exit_code=show_dry_run(prepared.suite, output, view.console, options.quiet))


def plan_run(prepared: Prepared) -> Planned:
    """Decide everything the engine needs: the agents' connectors, ``parallel``, where results go and
    which are done (a resume), the baseline, the engine; each mistake said before anything runs."""
    from farm._run.gating import load_baseline

    options, cfg, suite, stream = prepared.options, prepared.cfg, prepared.suite, prepared.suite.stream
    if not suite.cases and stream is None:
        raise UsageError(f"{suite.description}: no test cases to run")
    recorder = _golden(prepared)
    if options.interactive and (options.skip_interactive or not sys.stdin.isatty()):
        raise UsageError("--interactive needs a terminal on stdin (and cannot be combined with --skip-interactive)")
    agent_id, agents = (prepared.agent_id, prepared.agents) if prepared.agent_id is not None else ("", [""])  # script tests
    connectors = _connectors(prepared, agents)
    jsonl, skip_keys = _results(prepared, agent_id)
    against = load_baseline(prepared.options.baseline, cfg.results_dir, prepared.options.inputs, prepared.run_dir)  # a bad one: said before anything runs
    plan, engine = _engine_plan(prepared, agents, connectors, skip_keys)
    info = _run_info(prepared, agent_id, agents, connectors)
    cases = max(len(suite.cases), stream.asked if stream else 0)
    hook_info = {"input": prepared.options.input, "agent": agent_id, "agents": agents, "connector": connectors[agent_id], "run_id": prepared.run_id, "cases": cases}
    return Planned(prepared, agent_id, agents, connectors, plan, info, engine, jsonl, skip_keys, recorder, against, hook_info)


def _golden(prepared: Prepared) -> GoldenRecorder | None:
    """The recorder of ``--update-golden``; else every case attached to its golden conversation."""
    from farm.conversation.golden import GoldenRecorder, attach

    options = prepared.options
    if options.update_golden is not None:  # recording replaces comparing, as a snapshot update does
        return GoldenRecorder(Path(options.update_golden))
    folder = Path(options.golden) if options.golden is not None else prepared.cfg.golden_dir
    attach(prepared.suite.cases, folder, every=options.golden is not None, input=prepared.options.input)
    return None


def _connectors(prepared: Prepared, agents: list[str]) -> dict[str, str | None]:
    """Per agent under test, its connector (``-c`` over the agent's own), each checked to be configured."""
    cfg, override = prepared.cfg, prepared.options.connector
    connectors = {each: override or (cfg.agent(each).connector if each else None) for each in agents}
    for name in connectors.values():
        if name:
            cfg.connector(name)  # fail early, naming the configured connectors
    return connectors


def _results(prepared: Prepared, agent_id: str) -> tuple[Path, set[tuple[str, int, str]]]:
    """The results JSONL, and (a resume) the case runs it has finished: those left out of this part."""
    from farm.writers import finished_keys
    from farm.writers.jsonl import BROKEN

    options = prepared.options
    jsonl = Path(options.output) if options.output else prepared.run_dir / "results.jsonl"
    resumed = options.resume is not None and jsonl.exists()
    if options.retry_errors and not resumed:
        raise UsageError("--retry-errors: give it with --resume RUN_DIR, the run whose errors and timeouts to run again")
    return jsonl, (finished_keys(jsonl, agent_id, unless=BROKEN if options.retry_errors else ()) if resumed else set())


def _parallel(prepared: Prepared, connectors: dict[str, str | None]) -> int:
    """``--parallel``, else (a resume) the run's own, else the connectors' limits summed (:mod:`farm.ratelimit`)."""
    from farm.ratelimit import DEFAULT_PARALLEL, default_parallel

    given, cfg = prepared.options.parallel, prepared.cfg
    return given or sum(default_parallel(cfg.connectors[name]) if name else DEFAULT_PARALLEL for name in dict.fromkeys(connectors.values()))


def _engine_plan(prepared: Prepared, agents: list[str], connectors: dict[str, str | None], skip_keys: set[tuple[str, int, str]]) -> tuple[RunPlan, Engine]:
    """The run's plan and its engine (``auto`` chosen by the run's size); a cluster not there is said here."""
    from farm._run.setup import build_plan
    from farm.engines import Terminal, choose_engine, make_engine

    options, cfg, suite, stream = prepared.options, prepared.cfg, prepared.suite, prepared.suite.stream
    runs = prepared.options.runs
    engine_name = choose_engine(
        prepared.options.engine,
        address=options.address,
        conversations=max(len(suite.cases), stream.asked if stream else 0) * runs * len(agents) - len(skip_keys),
        resources=any(cfg.agents[each].declares_resources for each in agents if each in cfg.agents),
    )
    terminal = Terminal(sys.stdin, Say(prepared.view.console)) if options.interactive else None
    parallel = _parallel(prepared, connectors)
    fields = {"parallel": parallel, "runs": runs, "skip_keys": skip_keys, "terminal": terminal, "driver_calls": prepared.driver_calls}
    plan = build_plan(cfg, agents, suite, prepared.options, prepared.run_id, **fields)
    plan.stream = stream
    engine = make_engine(engine_name, **({"address": options.address} if engine_name == "ray" else {}))  # a cluster not there: said before anything runs
    return plan, engine


def _run_info(prepared: Prepared, agent_id: str, agents: list[str], connectors: dict[str, str | None]) -> RunInfo:
    """What ``run.json`` starts as."""
    from farm.writers import RunInfo

    options, previous, stream = prepared.options, prepared.previous, prepared.suite.stream
    return RunInfo(
        run_id=prepared.run_id,
        command=options.command or ["farm.run", *prepared.options.inputs],
        input=prepared.options.input,
        inputs=list(prepared.options.inputs),
        cwd=str(Path.cwd()),
        agent=agent_id,
        agents=agents,
        connector=connectors[agent_id],
        connectors=connectors,
        config=prepared.cfg.safe_dump(),
        options=options.recorded,
        generation=generation_record(stream.stats, previous) if stream is not None else None,
        parts=previous.recorded_parts() if previous is not None else [],
    )


class _Watch:
    """Told each result as it finishes: the endpoints' reach, a bounded sample of what went wrong
    (for the reporter), the golden recorder and the console."""

    def __init__(self, planned: Planned):
        self.reach = Reach()
        self.problems: list[dict[str, Any]] = []
        self.recorder = planned.recorder
        self.view = planned.prepared.view

    def __call__(self, result: CaseResult) -> None:
        self.reach.offer(result)
        if not result.status.ok and len(self.problems) < 200:
            self.problems.append({"id": result.id, "name": result.name, "status": result.status.value, "error": result.error})
        if self.recorder is not None:
            self.recorder.offer(result)
        self.view.result(result)


def execute_run(planned: Planned) -> RunResult:
    """Run the plan under the console: the ``before`` hook, the writers, the engine; then say how it
    went (:func:`_finish`). An interrupt or a lost engine ends it with the command that finishes it."""
    from farm._run.setup import execute_viewed
    from farm.writers.jsonl import drop_broken

    prepared = planned.prepared
    options, view, stream, info = prepared.options, prepared.view, prepared.suite.stream, planned.info
    if options.before:
        global_hook(prepared.cfg, options.before, {"phase": "before", **planned.hook_info})
    outputs, reports = _outputs(planned)
    extra = {"Run": prepared.run_id, "Engine": planned.engine.name, **({"Resuming": f"{len(planned.skip_keys)} finished"} if planned.skip_keys else {})}
    count = len(prepared.suite.cases) if stream is None else stream.asked
    progress, generating, message = not options.interactive, stream is not None, prepared.suite.description == MESSAGE  # a live bar would draw over the questions
    view.start(planned.agents, prepared.options.input, count, extra, planned.plan.total, progress=progress, generating=generating, message=message)  # a live bar would draw over the questions
    if stream is not None:
        planned.plan.on_generation = GenerationShown(info, view, prepared.previous)
    watch = _Watch(planned)
    if options.retry_errors:
        drop_broken(planned.jsonl)  # their new results replace them: every case once
    again = resume_command(prepared.run_dir, options.config, planned.engine.name)
    ended = execute_viewed(planned.plan, outputs, planned.engine, info, view, watch, again)
    if isinstance(ended, RunResult):
        return ended
    return _finish(planned, ended, watch, reports, again)


def _outputs(planned: Planned) -> tuple[RunOutputs, list[ReportFile]]:
    """Where the run's results go: its folder, the JSONL, the extra writers asked for, and its gate;
    and the report files among them (the summary names them)."""
    from farm._run.execution import RunOutputs
    from farm._run.gating import deciding
    from farm.writers.extra import extra_writers

    prepared, info = planned.prepared, planned.info
    options = prepared.options
    facts = {**planned.hook_info, "runs": prepared.options.runs, "parallel": planned.plan.parallel, "min_pass_rate": options.min_pass_rate}
    reports, streams = extra_writers(options, prepared.run_id, facts, lambda: info.gate)
    gate = deciding(options, planned.against)
    outputs = RunOutputs(run_dir=prepared.run_dir, jsonl=planned.jsonl, reports=reports, streams=streams, resume=options.resume is not None, gate=gate)
    return outputs, reports


def _finish(planned: Planned, summary: Summary, watch: _Watch, reports: list[ReportFile], again: str) -> RunResult:
    """After the run: the generation's line, why it stopped early, the summary and the gate, the
    reporter and the ``after`` hook; the exit code from all of them."""
    from farm._run.gating import show_gate
    from farm.engines import StopReason

    prepared = planned.prepared
    options, view, stream, info, run_dir = prepared.options, prepared.view, prepared.suite.stream, planned.info, prepared.run_dir
    console, quiet = view.console, options.quiet
    if stream is not None:
        count_after_run(run_dir, summary, generator_calls(stream, prepared.previous))  # made while the run went
        view.stop()
        if stream.stats.kept == 0 and options.resume is None:
            remove_run(run_dir, planned.jsonl)  # nothing ran: no folder is left as if it had (exit 2, below)
        generated(stream, console, quiet)
    view.stop()
    say_stopped(console, info.stop_reason, summary, prepared.options.max_cost, again)  # -q too: why a run ended early
    if watch.reach.unreachable is not None:
        console.print(f"[red]error:[/red] {escape(watch.reach.unreachable)}", soft_wrap=True, highlight=False, emoji=False)
    view.summary(summary, [f"Results: {planned.jsonl}", f"Parquet: {run_dir}/ (cases, turns, assertions)"], reports)
    if planned.recorder is not None and not quiet:
        for line in [planned.recorder.line(), *planned.recorder.problems]:
            console.print(line, soft_wrap=True, highlight=False, markup=False, emoji=False)
    code = show_gate(summary, info, view)  # the summary's last line
    if info.stop_reason == StopReason.MAX_COST:
        code = max(code, 1)
    if watch.reach.unreachable is not None:
        code = 1 if watch.reach.answers else 2  # an endpoint that could not be reached at all: nothing was tested
    if stream is not None and stream.error is not None:
        code = max(code, 1)  # the generator's failure cut the suite short: a role's error, never a green run
    if not _report_and_after(planned, summary, watch):
        code = 1
    return RunResult(code, run_dir, planned.jsonl, summary, planned.engine.name, prepared.run_id)


def _report_and_after(planned: Planned, summary: Summary, watch: _Watch) -> bool:
    """The reporter agent's ``report.md`` and the ``after`` hook; False when either failed (said in one line)."""
    from farm.roles.cache import tally

    prepared = planned.prepared
    options, console, run_dir = prepared.options, prepared.view.console, prepared.run_dir
    done = True
    if options.reporter:
        try:
            with tally() as reporter_calls:
                facts = {**planned.hook_info, "counts": summary.count_dict(), "problems": watch.problems}
                path = agent_report(prepared.cfg, options.reporter, run_dir, facts, options.cache)
            count_after_run(run_dir, summary, reporter_calls)
            if not options.quiet:
                console.print(f"Report: {path}", soft_wrap=True, highlight=False, markup=False)
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            done = False
    if options.after:
        try:
            global_hook(prepared.cfg, options.after, {"phase": "after", **planned.hook_info, "counts": summary.count_dict(), "run_dir": str(run_dir)})
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            done = False
    return done
