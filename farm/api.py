"""The public Python API: :func:`run` does everything ``farm test`` does, and
:func:`rescore` what ``farm rescore`` does.

It finds the config, resolves the agent's defaults (``tool_mocks``,
``input_tools``), sizes ``parallel`` from the connector's limits, picks the
engine, resumes, writes the JSONL, Parquet and extra reports, and returns a
:class:`RunResult`. The CLI parses options and calls it; a notebook calls it
the same way, and it works there too although an event loop is running::

    import farm
    result = farm.run("suite.jsonl", config="farm.toml", engine="local")
    result.exit_code, result.run_dir, result.summary.passed

Options left at None take the run's own value on ``resume`` and the farm's
default otherwise. A mistake in the input or the options raises
:class:`~farm.errors.FarmError` (one sentence) before anything runs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.markup import escape

from farm.durations import parse_duration
from farm.errors import UsageError

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.loader import Suite
    from farm.results import CaseResult
    from farm.rolecache import CallTally
    from farm.summary import Summary
    from farm.writers import RunInfo

__all__ = ["RunResult", "new_run_id", "rescore", "run", "run_async"]

DEFAULT_TIMEOUT = "5m"
DEFAULT_TURN_TIMEOUT = "2m"


@dataclass
class RunResult:
    """What a run ended with."""

    exit_code: int
    """0: every case passed or was skipped; 1: any failed, errored or timed out; 2: bad input
    (a ``dry_run`` with problems); 130: interrupted (resume with ``resume=run_dir``)."""
    run_dir: Path | None = None
    """The run folder (results, Parquet tables, ``run.json``); None for a dry run."""
    results: Path | None = None
    """The results JSONL."""
    summary: Summary | None = None
    """Counts of the whole run (earlier parts included after a resume)."""
    engine: str | None = None
    """``local`` or ``ray``."""
    run_id: str | None = None
    interrupted: bool = False


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def _seconds(flag: str, value: str | float) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def run(
    input: str | None = None,
    *,
    config: str | Path | FarmConfig | None = None,
    agent: str | None = None,
    engine: Literal["auto", "local", "ray"] | None = None,
    output: str | Path | None = None,
    connector: str | None = None,
    parallel: int | None = None,
    runs: int | None = None,
    timeout: str | float | None = None,
    turn_timeout: str | float | None = None,
    on_missing_input: Literal["skip", "fail"] | None = None,
    simulator: str | None = None,
    match: str | None = None,
    tags: list[str] | None = None,
    fail_fast: bool = False,
    dry_run: bool = False,
    resume: str | Path | None = None,
    address: str | None = None,
    interactive: bool = False,
    skip_interactive: bool | None = None,
    junit: str | Path | None = None,
    html: str | Path | None = None,
    json_events: bool = False,
    golden: str | Path | None = None,
    update_golden: str | Path | None = None,
    before: str | None = None,
    after: str | None = None,
    reporter: str | None = None,
    verbose: bool = False,
    console: Console | None = None,
    quiet: bool = False,
    command: list[str] | None = None,
    cache: bool = True,
    retries: int | None = None,
) -> RunResult:
    """Run a suite against an agent; the options are ``farm test``'s (SPEC section 2).

    - ``input``: a ``.jsonl``/``.json`` file, a message, ``agents:<id>?k=v``,
      ``scripts:<id>?k=v``, ``scripts.<module>`` (script tests) or ``-`` (stdin);
      with ``resume``, the run's own input by default.
    - ``config``: a ``farm.toml`` path or a loaded :class:`~farm.config.FarmConfig`;
      by default ``./farm.toml``, else the input file's folder and its parents.
    - ``agent``: the agent under test (default ``[farm].default_agent``).
    - ``engine``: ``local``, ``ray`` or ``auto`` (default ``[farm].engine``, else ``auto``).
    - ``match``: only cases whose id matches this regex (``--run``); ``tags``: only these tags.
    - ``golden``: compare every case with its golden conversation in this folder (``--golden``);
      without it, the cases that set ``golden`` compare with ``[farm].golden_dir``.
    - ``update_golden``: write every passed case's conversation to this folder instead (no comparing).
    - ``console``: where the tree and the summary go (default: standard output,
      standard error with ``json_events``); ``quiet``: print nothing.
    - ``command``: what ``run.json`` records as the command line (default: this call).
    - ``cache``: False (``--no-cache``) sends every role call, none answered from the role cache.
    - ``retries``: times a case that ended in an agent error or timeout runs again (default 0).
    """
    from farm.rolecache import tally
    from farm.writers import RunInfo, finished_keys, read_run_json

    previous: RunInfo | None = read_run_json(resume) if resume is not None else None
    earlier = previous.options if previous is not None else {}
    input_value = input or (previous.input if previous else None)
    if not input_value:
        raise UsageError("no input: give -i/--input (a .jsonl file, a message, agents:<id>, scripts:<id> or -)")
    on_missing = on_missing_input or earlier.get("on_missing_input") or "skip"
    if on_missing not in ("skip", "fail"):
        raise UsageError(f"--on-missing-input: '{on_missing}' is not one of: skip, fail")
    case_timeout = _seconds("--timeout", timeout or earlier.get("timeout") or DEFAULT_TIMEOUT)
    per_turn = _seconds("--turn-timeout", turn_timeout or earlier.get("turn_timeout") or DEFAULT_TURN_TIMEOUT)
    runs = runs or (previous.runs if previous else 1)
    if runs < 1:
        raise UsageError(f"--runs: {runs} is not a positive number")
    connector = connector or earlier.get("connector")
    retries = retries if retries is not None else earlier.get("retries", 0)
    if retries < 0:
        raise UsageError(f"--retries: {retries} is not 0 or more")

    with tally() as driver_calls:  # a generator's call, before the run
        cfg, agent_id, suite = _prepare(input_value, agent or (previous.agent if previous else None), config, match, tags, dry_run, cache)
    from farm.validation import check_for_run  # every check that needs no agent call (SPEC 2)

    check_for_run(suite, cfg, agent_id, simulator=simulator or earlier.get("simulator"), connector=connector, dry_run=dry_run)
    if console is None:
        console = Console(stderr=json_events, highlight=False)
    show = not (quiet or json_events)
    if dry_run:
        return RunResult(exit_code=_dry_run(suite, Path(output) if output else None, console, quiet))

    if not suite.cases:
        raise UsageError(f"{suite.description}: no test cases to run")
    from farm.golden import GoldenRecorder, attach

    golden = golden or earlier.get("golden")
    update_golden = update_golden or earlier.get("update_golden")
    recorder = GoldenRecorder(Path(update_golden)) if update_golden is not None else None
    if recorder is None:  # recording replaces comparing, as a snapshot update does
        attach(suite.cases, Path(golden) if golden is not None else cfg.golden_dir, every=golden is not None, input=input_value)
    if interactive and (skip_interactive or not sys.stdin.isatty()):
        raise UsageError("--interactive needs a terminal on stdin (and cannot be combined with --skip-interactive)")
    assert agent_id is not None
    target = cfg.agent(agent_id)
    connector_name = connector or target.connector
    if connector_name:
        cfg.connector(connector_name)  # fail early, naming the configured connectors
    cfg.check_keys()  # a key with a stray newline is a usage error before anything runs

    from farm.engines import RunPlan, Terminal, choose_engine, make_engine
    from farm.execution import RunInterrupted, RunOutputs, RunStopped, execute
    from farm.ratelimit import DEFAULT_PARALLEL, default_parallel
    from farm.runner import RunSettings

    parallel = parallel or (previous.parallel if previous else None) or (
        default_parallel(cfg.connectors[connector_name]) if connector_name else DEFAULT_PARALLEL
    )
    run_id = (previous.run_id if previous else None) or new_run_id()
    run_dir = Path(resume) if resume is not None else cfg.results_dir / run_id
    jsonl = Path(output) if output else Path(previous.results if previous and previous.results else run_dir / "results.jsonl")
    skip_keys = finished_keys(jsonl) if resume is not None and jsonl.exists() else set()
    engine_name = choose_engine(
        engine or cfg.farm.engine or "auto", address=address, conversations=len(suite.cases) * runs - len(skip_keys)
    )

    settings = RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=on_missing,
        case_timeout=case_timeout,
        turn_timeout=per_turn,
        interactive=interactive,
        default_simulator=simulator or earlier.get("simulator") or cfg.farm.simulator,
        input_tools=tuple(target.input_tools),
        agent_tool_mocks=dict(target.tool_mocks),
        max_tool_steps=target.max_tool_steps,
        cache=cache,
    )
    say = _Say(console)
    plan = RunPlan(
        config=cfg,
        cases=suite.cases,
        settings=settings,
        parallel=parallel,
        runs=runs,
        fail_fast=fail_fast,
        connector_override=connector,
        actors=cfg.farm.actors,
        skip_keys=skip_keys,
        terminal=Terminal(sys.stdin, say) if interactive else None,
        retries=retries,
        driver_calls=driver_calls,
    )
    info = RunInfo(
        run_id=run_id,
        command=command or ["farm.run", input_value],
        input=input_value,
        agent=agent_id,
        connector=connector_name,
        config=cfg.safe_dump(),
        options={
            "timeout": case_timeout,
            "turn_timeout": per_turn,
            "on_missing_input": on_missing,
            "simulator": settings.default_simulator,
            "fail_fast": fail_fast,
            "match": match,
            "tags": tags or [],
            "interactive": interactive,
            "connector": connector,
            "golden": str(golden) if golden is not None else None,
            "update_golden": str(update_golden) if update_golden is not None else None,
            "retries": retries,
            "cache": cache,
        },
    )
    hook_info = {"input": input_value, "agent": agent_id, "connector": connector_name, "run_id": run_id, "cases": len(suite.cases)}
    if before:
        _global_hook(cfg, before, {"phase": "before", **hook_info})

    from farm.console import ConsoleReporter

    reports, streams = _extra_writers(junit, html, json_events, run_id, {**hook_info, "runs": runs, "parallel": parallel})
    view = ConsoleReporter(console, verbose=verbose)
    if show:
        extra = {"Run": run_id, "Engine": engine_name}
        if skip_keys:
            extra["Resuming"] = f"{len(skip_keys)} finished"
        view.header(agent_id, input_value, len(suite.cases), extra)
        if not interactive:  # a live bar would draw over the questions
            view.start_progress(plan.total)
    problems: list[dict[str, Any]] = []  # a bounded sample of what went wrong, for the reporter

    def on_result(result: CaseResult) -> None:
        if not result.status.ok and len(problems) < 200:
            problems.append({"id": result.id, "name": result.name, "status": result.status.value, "error": result.error})
        if recorder is not None:
            recorder.offer(result)
        if show:
            view.advance(result)
            view.case(result)

    outputs = RunOutputs(run_dir=run_dir, jsonl=jsonl, reports=reports, streams=streams, resume=resume is not None)
    engine_impl = make_engine(engine_name, **({"address": address} if engine_name == "ray" else {}))
    try:
        summary = execute(plan, outputs, engine_impl, info=info, on_result=on_result, on_phase=view.phase if show else lambda p: None)
    except RunInterrupted as stop:
        view.stop_progress()
        again = f"farm test --resume {stop.run_dir}" + (f" --config {config}" if isinstance(config, (str, Path)) else "")
        if isinstance(stop, RunStopped):  # the engine went away: no case's fault
            console.print(
                f"\n[red]error:[/red] {stop.reason}: {stop.done} of {stop.total} case runs finished, results kept; resume with: {escape(again)}",
                soft_wrap=True,
            )
            return RunResult(1, run_dir, jsonl, stop.summary, engine_name, run_id, interrupted=True)
        if not quiet:
            console.print(f"\n[yellow]Interrupted[/yellow]: {stop.done} of {stop.total} case runs finished; their results are kept.", soft_wrap=True, emoji=False)
            console.print(f"Resume with: {again}", soft_wrap=True, markup=False)
        return RunResult(130, run_dir, jsonl, stop.summary, engine_name, run_id, interrupted=True)
    view.stop_progress()
    if show:
        lines = [f"Results: {jsonl}", f"Parquet: {run_dir}/ (cases, turns, assertions)"]
        lines += [f"{w.label}: {w.path}" for w in reports if hasattr(w, "label")]
        view.summary(summary, lines)
    if recorder is not None and not quiet:
        for line in [recorder.line(), *recorder.problems]:
            console.print(line, soft_wrap=True, highlight=False, markup=False, emoji=False)
    code = summary.exit_code
    if reporter:
        try:
            with tally() as reporter_calls:
                path = _agent_report(cfg, reporter, run_dir, {**hook_info, "counts": summary.count_dict(), "problems": problems}, cache)
            _count_after_run(run_dir, summary, reporter_calls)
            if not quiet:
                console.print(f"Report: {path}", soft_wrap=True, highlight=False, markup=False)
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    if after:
        try:
            _global_hook(cfg, after, {"phase": "after", **hook_info, "counts": summary.count_dict(), "run_dir": str(run_dir)})
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    return RunResult(code, run_dir, jsonl, summary, engine_name, run_id)


def rescore(
    run_dir: str | Path,
    input: str | None = None,
    *,
    config: str | Path | FarmConfig | None = None,
    output: str | Path | None = None,
    match: str | None = None,
    cache: bool = True,
    junit: str | Path | None = None,
    html: str | Path | None = None,
    json_events: bool = False,
    verbose: bool = False,
    console: Console | None = None,
    quiet: bool = False,
    command: list[str] | None = None,
) -> RunResult:
    """Re-evaluate a suite's assertions against the conversations recorded in ``run_dir``
    (``farm rescore``, SPEC section 2): nothing is sent to the agent under test or the simulator.

    - ``input``: the suite, by default the run's own; an edited copy re-judges the same
      conversations with its assertions, checkpoints and ``final_assertions``.
    - ``config``: as for :func:`run`; by default found from the input as ``farm test`` does.
    - ``match``: only cases whose id matches this regex (``--run``).
    - ``cache``: whether role calls (the validators of ``agent`` assertions) may be answered
      from the role cache; ``farm rescore --no-cache`` sets it False.

    The result is a new run folder beside the source (its own ``run_id``, results JSONL, Parquet
    tables, ``run.json`` with ``rescored_from``), written as ``farm test`` writes a run, so
    ``farm report OLD NEW`` compares the two. A case that cannot be rescored (its inputs changed,
    or the edited case needs more of the conversation than was recorded) is an ``error`` with
    ``rescorable: false`` (:mod:`farm.replay`). Rescoring always runs in this process.
    """
    from farm.console import ConsoleReporter
    from farm.engines import RunPlan, make_engine
    from farm.execution import RunInterrupted, RunOutputs, execute
    from farm.ratelimit import DEFAULT_PARALLEL
    from farm.replay import Replay
    from farm.results import CaseResult
    from farm.runner import RunSettings
    from farm.validation import check_suite
    from farm.writers import RUN_JSON, RunInfo, read_jsonl_results, read_run_json

    source = Path(run_dir)
    if not (source / RUN_JSON).is_file():
        raise UsageError(f"{run_dir} is not a run folder: it has no {RUN_JSON} (give a folder that farm test wrote, e.g. results/<run_id>)")
    previous = read_run_json(source)
    jsonl_in = source / "results.jsonl"
    if not jsonl_in.is_file() and previous.results:
        jsonl_in = Path(previous.results)
    if not jsonl_in.is_file():
        raise UsageError(f"{run_dir} holds no results to rescore: {jsonl_in} does not exist")
    recorded: dict[tuple[str, int], CaseResult] = {}
    for record in read_jsonl_results(jsonl_in):
        result = CaseResult.model_validate(record)
        recorded.setdefault((result.id, result.run_index), result)
    input_value = input or previous.input
    if not input_value:
        raise UsageError(f"{source / RUN_JSON} names no input; give the suite with -i/--input")
    if input is None and (input_value == "-" or input_value.startswith("agents:")):
        raise UsageError(f"the run's input ({input_value}) cannot be read again; give the suite with -i/--input (farm test --dry-run -o FILE writes it)")
    earlier = previous.options
    cfg, agent_id, suite = _prepare(input_value, previous.agent, config, match, None, False)
    default_simulator = earlier.get("simulator") or cfg.farm.simulator
    check_suite(suite, cfg, default_simulator=default_simulator)  # the suite's own checks; the agent is not called
    if not suite.cases:
        raise UsageError(f"{suite.description}: no test cases to rescore")
    from farm.golden import attach

    golden = earlier.get("golden")  # golden conversations are judged again, as the run judged them
    attach(suite.cases, Path(golden) if golden is not None else cfg.golden_dir, every=golden is not None, input=input_value)
    assert agent_id is not None
    target = cfg.agent(agent_id)
    run_id = new_run_id()
    out_dir = cfg.results_dir / run_id
    jsonl = Path(output) if output else out_dir / "results.jsonl"
    settings = RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=earlier.get("on_missing_input") or "skip",
        case_timeout=_seconds("--timeout", earlier.get("timeout") or DEFAULT_TIMEOUT),
        turn_timeout=_seconds("--turn-timeout", earlier.get("turn_timeout") or DEFAULT_TURN_TIMEOUT),
        interactive=bool(earlier.get("interactive")),
        default_simulator=default_simulator,
        input_tools=tuple(target.input_tools),
        agent_tool_mocks=dict(target.tool_mocks),
        max_tool_steps=target.max_tool_steps,
        cache=cache,
    )
    plan = RunPlan(
        config=cfg,
        cases=suite.cases,
        settings=settings,
        parallel=previous.parallel or DEFAULT_PARALLEL,
        runs=previous.runs or 1,
        replay=Replay(recorded, previous.run_id or source.name),
    )
    info = RunInfo(
        run_id=run_id,
        command=command or ["farm.rescore", str(run_dir), *([input] if input else [])],
        input=input_value,
        agent=agent_id,
        connector=previous.connector,
        config=cfg.safe_dump(),
        options={**earlier, "match": match, "cache": cache},
        rescored_from={"run_id": previous.run_id or source.name, "run_dir": str(source)},
    )
    if console is None:
        console = Console(stderr=json_events, highlight=False)
    show = not (quiet or json_events)
    hook_info = {"input": input_value, "agent": agent_id, "run_id": run_id, "cases": len(suite.cases), "rescored_from": info.rescored_from}
    reports, streams = _extra_writers(junit, html, json_events, run_id, {**hook_info, "runs": plan.runs, "parallel": plan.parallel})
    view = ConsoleReporter(console, verbose=verbose)
    if show:
        view.header(agent_id, input_value, len(suite.cases), {"Run": run_id, "Rescoring": previous.run_id or str(source)})
        view.start_progress(plan.total)
    unscored = 0

    def on_result(result: CaseResult) -> None:
        nonlocal unscored
        unscored += result.rescorable is False
        info.not_rescorable = unscored
        if show:
            view.advance(result)
            view.case(result)

    outputs = RunOutputs(run_dir=out_dir, jsonl=jsonl, reports=reports, streams=streams)
    try:
        summary = execute(plan, outputs, make_engine("local"), info=info, on_result=on_result, on_phase=view.phase if show else lambda p: None)
    except RunInterrupted as stop:
        view.stop_progress()
        if not quiet:
            console.print(f"\n[yellow]Interrupted[/yellow]: {stop.done} of {stop.total} case runs rescored; their results are kept.", soft_wrap=True, emoji=False)
        return RunResult(130, out_dir, jsonl, stop.summary, "local", run_id, interrupted=True)
    view.stop_progress()
    if show:
        lines = [f"Rescored from: {source}", f"Results: {jsonl}", f"Parquet: {out_dir}/ (cases, turns, assertions)"]
        if unscored:
            lines.append(f"{unscored} not rescorable: their inputs changed or they need turns the run did not record; rerun them with farm test")
        lines += [f"{w.label}: {w.path}" for w in reports if hasattr(w, "label")]
        view.summary(summary, lines)
    return RunResult(summary.exit_code, out_dir, jsonl, summary, "local", run_id)


async def run_async(input: str | None = None, **options: Any) -> RunResult:
    """:func:`run` for ``await`` in async code: the run goes on in a thread, the loop stays free."""
    return await asyncio.to_thread(run, input, **options)


class _Say:
    """Interactive mode's lines on the console, printed literally."""

    def __init__(self, console: Console):
        self.console = console

    def __call__(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True, end="" if text.endswith(": ") else "\n")


def _prepare(
    input: str,
    agent: str | None,
    config: str | Path | FarmConfig | None,
    match: str | None,
    tags: list[str] | None,
    dry_run: bool,
    cache: bool = True,
) -> tuple[FarmConfig, str | None, Suite]:
    """The config, the agent under test and the selected cases."""
    from farm.config import FarmConfig, find_config, load_config
    from farm.inputs import input_path, resolve_input

    if isinstance(config, FarmConfig):
        cfg = config
    else:
        cfg = load_config(find_config(str(config) if config is not None else None, input_path(input)))
    agent_id = agent or cfg.farm.default_agent
    if agent_id is None and not dry_run and not input.startswith("scripts."):
        raise UsageError("no agent to test: give -n/--name or set [farm].default_agent in farm.toml")
    if agent_id is not None and not dry_run:
        cfg.agent(agent_id)  # fail early, naming the configured agents
    from farm.rolecache import RoleCache

    role_cache = RoleCache.for_config(cfg) if cache else None
    suite = resolve_input(input, cfg, agent_id, compact=not dry_run, cache=role_cache).select(match, tags or [])
    return cfg, agent_id, suite


def _agent_report(cfg: FarmConfig, agent_id: str, run_dir: Path, run_summary: dict[str, Any], cache: bool = True) -> Path:
    """Ask the reporter agent for a Markdown report of the run; write it beside the results."""
    from farm.rolecache import RoleCache
    from farm.roles import RolePlayer

    player = RolePlayer.from_config("reporter", cfg, agent_id, cache=RoleCache.for_config(cfg) if cache else None)
    try:
        text = player.run_once(lambda p: p.report(run_summary))
    except Exception as exc:
        raise UsageError(f"--reporter {agent_id}: the reporter failed: {type(exc).__name__}: {exc}") from None
    path = run_dir / "report.md"
    path.write_text(text, encoding="utf-8")
    return path


def _count_after_run(run_dir: Path, summary: Summary, calls: CallTally) -> None:
    """Add role calls made after the run (the reporter's) to its summary and ``run.json``."""
    from farm.writers import read_run_json, write_run_json

    summary.role_calls += calls.role_calls
    summary.cache_hits += calls.cache_hits
    info = read_run_json(run_dir)
    info.role_cache = summary.role_cache()
    write_run_json(run_dir, info)


def _global_hook(cfg: FarmConfig, reference: str, payload: dict[str, Any]) -> None:
    """Run a ``before``/``after`` hook in this process; its failure is one sentence."""
    from farm.aio import run_sync
    from farm.scripts import ScriptResolver, call_maybe_async

    fn = ScriptResolver(cfg.scripts_dir).resolve(reference)
    try:
        run_sync(call_maybe_async(fn, payload))
    except Exception as exc:
        raise UsageError(f"global {payload['phase']} hook {reference} failed: {type(exc).__name__}: {exc}") from None


def _extra_writers(junit: str | Path | None, html: str | Path | None, json_events: bool, run_id: str, info: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """``(reports, streams)``: JUnit and HTML files, and the NDJSON events on standard output."""
    reports: list[Any] = []
    streams: list[Any] = []
    if json_events:
        from farm.events import EventWriter

        events = EventWriter(sys.stdout, run_id)
        events.start(info)
        streams.append(events)
    if junit:
        from farm.reports.junit import JUnitWriter

        reports.append(JUnitWriter(Path(junit), run_id))
    if html:
        from farm.reports.html import HTMLWriter

        reports.append(HTMLWriter(Path(html), run_id))
    return reports, streams


def _dry_run(suite: Suite, output: Path | None, console: Console, quiet: bool) -> int:
    lines = []
    for loaded in suite.cases:
        if loaded.case is not None:
            data = loaded.case.model_dump(mode="json", exclude_defaults=True)
            lines.append(json.dumps(data, ensure_ascii=False))
    for line in lines:
        print(line)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    if not quiet:
        for problem in suite.problems:
            console.print(f"[red]error:[/red] {escape(problem)}", highlight=False, emoji=False)
        for warning in suite.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, emoji=False)
        valid = sum(1 for c in suite.cases if c.ok)
        line = f"{valid} valid case(s), {len(suite.problems)} with problems" + (f"; written to {output}" if output else "")
        console.print(escape(line), highlight=False, emoji=False)
    return 2 if suite.problems else 0
