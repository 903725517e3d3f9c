""":func:`farm.run`'s and :func:`farm.rescore`'s phases after their options are resolved
(:mod:`farm._run.request`): :func:`prepare_run` loads and checks the cases,
:func:`~farm._run.planning.plan_run` decides everything the engine needs, :func:`execute_run`
runs it under the console and :func:`_finish` says how it went. Each phase hands the next one
record (:class:`Prepared`, :class:`~farm._run.planning.Planned`); nothing runs before the last.
A rescore is a run whose :class:`Rescoring` replays recorded turns where agents would be called.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from farm._run.closing import (
    Watch,
    count_after_run,
    global_hook,
    remove_run,
    report_and_after,
    resume_command,
    say_stopped,
    show_dry_run,
)
from farm._run.phases import Planned, Prepared, Rescoring
from farm._run.planning import plan_run
from farm._run.request import ResolvedOptions, RunRequest
from farm._run.result import RunResult, new_run_id
from farm.errors import InputError
from farm.feed import RunEnd
from farm.results._folder import RUN_JSON
from farm.suite.loader import MESSAGE

if TYPE_CHECKING:
    from farm._run.execution import RunOutputs
    from farm.config import FarmConfig
    from farm.loaded import LoadedCase
    from farm.summary import Summary
    from farm.writers import RunInfo
    from farm.writers.base import ResultWriter
    from farm.writers.extra import ReportFile

__all__ = ["Planned", "Prepared", "Rescoring", "dry_run", "execute_run", "plan_run", "prepare_run", "run_request"]


def run_request(request: RunRequest) -> RunResult:
    """:func:`farm.run` from its frozen request: the config, the options resolved, the cases
    prepared; then a dry run, or the plan executed and finished."""
    from farm._run.request import locate, resolve
    from farm._run.setup import check_resume
    from farm.writers import read_run_json

    check_resume(request.resume)
    previous = read_run_json(request.resume) if request.resume is not None else None
    cfg = locate(request, previous)
    prepared = prepare_run(resolve(request, previous, cfg), cfg, previous)
    return dry_run(prepared) if request.dry_run else execute_run(plan_run(prepared))


def _budget_source(options: ResolvedOptions) -> str:
    """Where the run's budget came from, as its error names it: the flag, the resumed run, or ``[farm]``."""
    source = options.sources.get("max_cost", "")
    if source.startswith(RUN_JSON):
        return "the resumed run's --max-cost"
    return "--max-cost" if source.startswith("--") else "[farm].max_cost"


def prepare_run(
    options: ResolvedOptions, cfg: FarmConfig, previous: RunInfo | None, rescoring: Rescoring | None = None
) -> Prepared:
    """Load the selected cases (a generator's calls counted for the run) and check everything that
    needs no agent call, as ``farm validate`` does (:func:`~farm.suite.checks.check_before_run`);
    the run's id, folder and console. ``previous``: the run resumed; ``rescoring``: the run
    rescored, whose agents are not called (so not checked)."""
    from farm._run.setup import check_outputs, prepare
    from farm._run.view import RunView
    from farm.roles.cache import tally
    from farm.suite.checks import check_before_run, check_cases

    agents = options.agents
    agent_id = agents[0] if agents else None
    dry = options.dry_run
    run_id = (previous.run_id if previous else None) or new_run_id()
    run_dir = Path(options.resume) if options.resume is not None else cfg.results_dir / run_id
    check_outputs(options, cfg.results_dir)  # before a generator is asked for cases, or any case runs
    with tally() as driver_calls:  # a generator's call, before the run
        suite = prepare(cfg, options.inputs, agent_id, options.match, options.tags, dry, options.cache, options.simulator)
    check_cases(suite, options.match, options.tags, "rescore" if rescoring is not None else "run")
    budget, budget_from = options.max_cost, _budget_source(options)
    calls = not dry and rescoring is None
    check_before_run(
        suite,
        cfg,
        agents,
        simulator=options.simulator,
        connector=options.connector,
        max_cost=budget,
        max_cost_from=budget_from,
        dry_run=not calls,
        golden_dir=Path(options.golden) if options.golden is not None else cfg.golden_dir,
        recording=options.update_golden is not None,
        reporter=options.reporter,
    )
    if suite.problems and not dry:  # as pytest stops on a collection error (a rescore's edited suite too)
        raise InputError(suite.problems)
    view = RunView(options.console, json_events=options.json_events, quiet=options.quiet, verbose=options.verbose)
    if not dry:  # the cases its feed has at once (a resumed run's generated ones), the selection kept for what arrives
        suite.cases += suite.feed.open(run_dir, _selection(options) if options.match or options.tags else None)
    return Prepared(options, cfg, previous, agent_id, agents, suite, view, run_id, run_dir, driver_calls, rescoring)


def _selection(options: ResolvedOptions) -> Callable[[list[LoadedCase]], list[LoadedCase]]:
    """The run's selection (``--run``, ``--tag``), for the cases that arrive from a feed."""
    from farm.suite.loader import Suite

    return lambda cases: Suite(cases).select(options.match, options.tags).cases


def dry_run(prepared: Prepared) -> RunResult:
    """``--dry-run``: the cases (and those its feed would hand over, made here) printed, and written with ``-o``."""
    options, view, suite = prepared.options, prepared.view, prepared.suite
    try:
        suite.cases += suite.feed.here(prepared.cfg, options.cache, view.console, options.quiet, _selection(options))
    except KeyboardInterrupt:
        return RunResult(130, interrupted=True)
    given = prepared.options.given.output  # -o alone: a resumed run's results file is not where its cases go
    output = Path(given) if given else None
    return RunResult(exit_code=show_dry_run(prepared.suite, output, view.console, options.quiet))


def execute_run(planned: Planned) -> RunResult:
    """Run the plan under the console: the ``before`` hook, the writers, the engine; then say how it
    went (:func:`_finish`). An interrupt or a lost engine ends it with the command that finishes it."""
    from farm._run.setup import execute_viewed
    from farm.writers.jsonl import drop_broken

    prepared = planned.prepared
    options, view, feed, info, rescoring = prepared.options, prepared.view, prepared.suite.feed, planned.info, prepared.rescoring
    if options.before:
        global_hook(prepared.cfg, options.before, {"phase": "before", **planned.hook_info})
    outputs, reports = _outputs(planned)
    progress = rescoring is not None or not options.interactive  # a live bar would draw over the questions
    message = prepared.suite.description == MESSAGE
    plan = planned.plan
    plan.on_progress = feed.watch(info, view, prepared.previous)  # a generation's progress line
    adaptive = plan.sequential is not None  # the tries are not known ahead: the line counts cases decided
    total = plan.cases_to_decide if adaptive else plan.total
    view.start(
        planned.agents,
        options.input,
        plan.case_count,
        _header(planned),
        total,
        progress=progress,
        generating=not feed.closed,
        message=message,
        adaptive=adaptive,
        warnings=prepared.suite.warnings,
    )
    watch = Watch(planned)
    if options.retry_errors:
        drop_broken(planned.jsonl)  # their new results replace them: every case once
    again = resume_command(prepared.run_dir, options.config, planned.engine.name) if rescoring is None else None
    with planned.receiver or nullcontext():
        ended = execute_viewed(planned.plan, outputs, planned.engine, info, view, watch, again)
    if isinstance(ended, RunResult):
        return ended
    return _finish(planned, ended, watch, reports, again)


def gate_asked(options: ResolvedOptions) -> bool:
    """Whether the run asked for a gate beyond "every case passes": a pass rate (given, or
    ``[farm]``'s), a baseline, or repeats; only then is its ``Gate:`` line worth a line."""
    return "min_pass_rate" in options.sources or options.baseline is not None or int(options.runs) > 1


def _header(planned: Planned) -> dict[str, str]:
    """The header's lines after the agent and the input."""
    prepared = planned.prepared
    if prepared.rescoring is not None:
        return {"Run": prepared.run_id, "Rescoring": prepared.rescoring.source_id}
    resuming = {"Resuming": f"{len(planned.skip_keys)} finished"} if planned.skip_keys else {}
    traces = {"Traces": f"{planned.receiver.url} (the agent's OTEL_EXPORTER_OTLP_ENDPOINT)"} if planned.receiver else {}
    otlp = getattr(prepared.options, "otlp", None)
    export = {"Export": f"{otlp} (each case run as a trace)"} if otlp else {}
    return {"Run": prepared.run_id, "Engine": planned.engine.name, **resuming, **traces, **export}


def _export(planned: Planned) -> ResultWriter:
    """``--otlp``'s writer: each case run sent as a trace, naming each agent's (and role's) model where its connector does."""
    from farm.traces.export import OTLPExport

    cfg, options = planned.prepared.cfg, planned.prepared.options
    connectors = {agent: each.connector for agent, each in cfg.agents.items()} | dict(
        planned.connectors
    )  # roles', and the tested agents' (-c)
    models = {agent: cfg.connectors[name].model for agent, name in connectors.items() if name in cfg.connectors}
    assert options.otlp is not None
    return OTLPExport(options.otlp, planned.prepared.run_id, models, content=options.otlp_content)


def _outputs(planned: Planned) -> tuple[RunOutputs, list[ReportFile]]:
    """Where the run's results go: its folder, the JSONL, the extra writers asked for, and its gate;
    and the report files among them (the summary names them)."""
    from farm._run.execution import RunOutputs
    from farm._run.gating import deciding
    from farm.writers.extra import extra_writers

    prepared, info, options = planned.prepared, planned.info, planned.prepared.options
    facts = {**planned.hook_info, "runs": options.runs, "parallel": planned.plan.parallel, "min_pass_rate": options.min_pass_rate}
    reports, streams = extra_writers(options, prepared.run_id, facts, lambda: info.gate)
    if getattr(options, "otlp", None):
        streams.append(_export(planned))
    gate = deciding(options, planned.against)
    outputs = RunOutputs(
        run_dir=prepared.run_dir,
        jsonl=planned.jsonl,
        reports=reports,
        streams=streams,
        resume=options.resume is not None,
        gate=gate,
    )
    return outputs, reports


def _finish(planned: Planned, summary: Summary, watch: Watch, reports: list[ReportFile], again: str | None) -> RunResult:
    """After the run: what its feed adds (a generation's line), why it stopped early, the summary
    and the gate, the reporter and the ``after`` hook; the exit code from all of them."""
    from farm._run.gating import show_gate
    from farm.engines import StopReason

    prepared = planned.prepared
    options, view, info, run_dir = prepared.options, prepared.view, planned.info, prepared.run_dir
    console, quiet = view.console, options.quiet
    view.stop()
    count = partial(count_after_run, run_dir, summary)
    end = RunEnd(
        run_dir,
        summary,
        prepared.previous,
        console,
        quiet,
        options.resume is not None,
        count,
        partial(remove_run, run_dir, planned.jsonl),
    )
    feed_failed = prepared.suite.feed.after_run(end)
    not_run = info.gate.not_run if info.gate is not None else 0
    say_stopped(console, info.stop_reason, summary, options.max_cost, again or "", not_run)  # -q too: why a run ended early
    if watch.reach.unreachable is not None:
        console.print(f"[red]error:[/red] {escape(watch.reach.unreachable)}", soft_wrap=True, highlight=False, emoji=False)
    source = [f"Rescored from: {prepared.rescoring.source}"] if prepared.rescoring is not None else []
    refused = watch.reach.unreachable is not None and not watch.reach.answers  # at the start: its one sentence says it all
    if not refused:
        view.summary(summary, [*source, f"Results: {planned.jsonl}", f"Parquet: {run_dir}/ (cases, turns, assertions)"], reports)
    else:
        view.stop()
    if planned.recorder is not None and not quiet:
        for line in [planned.recorder.line(), *planned.recorder.problems]:
            console.print(line, soft_wrap=True, highlight=False, markup=False, emoji=False)
    code = show_gate(summary, info, view, asked=gate_asked(options), refused=refused)  # the summary's last line
    if info.stop_reason == StopReason.MAX_COST:
        code = max(code, 1)
    if watch.reach.unreachable is not None:
        code = 1 if watch.reach.answers else 2  # an endpoint that could not be reached at all: nothing was tested
    if feed_failed:
        code = max(code, 1)  # the generator's failure cut the suite short: a role's error, never a green run
    if not report_and_after(planned, summary, watch):
        code = 1
    return RunResult(code, run_dir, planned.jsonl, summary, planned.engine.name, prepared.run_id)
