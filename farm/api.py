"""The public Python API: :func:`run` does everything ``farm test`` does, and
:func:`rescore` (:mod:`farm._run.rescoring`) what ``farm rescore`` does.

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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rich.console import Console
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
from farm._run.rescoring import rescore
from farm._run.result import RunResult, new_run_id
from farm.errors import InputError, UsageError

if TYPE_CHECKING:

    from farm.config import FarmConfig
    from farm.results import CaseResult
    from farm.writers import RunInfo

_T = TypeVar("_T")

__all__ = ["RunResult", "new_run_id", "rescore", "run", "run_async"]


def run(
    input: str | None = None,
    *,
    config: str | Path | FarmConfig | None = None,
    agent: str | Sequence[str] | None = None,
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
    max_cost: float | None = None,
    min_pass_rate: float | None = None,
    baseline: str | Path | None = None,
    retry_errors: bool = False,
    run: str | None = None,
    name: str | Sequence[str] | None = None,
    json: bool = False,
) -> RunResult:
    """Run a suite against an agent; the options are ``farm test``'s (SPEC section 2).

    - ``input``: a ``.jsonl``/``.json`` file, a message, ``agents:<id>?k=v``,
      ``scripts:<id>?k=v``, ``scripts.<module>`` (script tests) or ``-`` (stdin);
      with ``resume``, the run's own input by default.
    - ``config``: a ``farm.toml`` path or a loaded :class:`~farm.config.FarmConfig`;
      by default ``./farm.toml``, else the input file's folder and its parents.
    - ``agent``: the agent under test (default ``[farm].default_agent``), or a list of agents
      (``-n A -n B``): every case runs on each, in one run, each result naming its ``agent``.
    - ``engine``: ``local``, ``ray`` or ``auto`` (default: with ``resume``, the run's own; else
      ``[farm].engine``, else ``auto``).
    - ``match``: only cases whose id matches this regex (``--run``); ``tags``: only these tags.
    - ``golden``: compare every case with its golden conversation in this folder (``--golden``);
      without it, the cases that set ``golden`` compare with ``[farm].golden_dir``.
    - ``update_golden``: write every passed case's conversation to this folder instead (no comparing).
    - ``console``: where the tree and the summary go (default: standard output,
      standard error with ``json_events``); ``quiet`` (``-q``): one line per case that did
      not pass and the summary (``console=rich.console.Console(quiet=True)`` prints nothing).
    - ``command``: what ``run.json`` records as the command line (default: this call).
    - ``cache``: False (``--no-cache``) sends every role call, none answered from the role cache.
    - ``retries``: times a case that ended in an agent error or timeout runs again (default 0).
    - ``max_cost``: USD after which nothing more is dispatched (``--max-cost``, else ``[farm].max_cost``);
      what is in flight finishes, and ``resume`` with a larger budget runs the rest.
    - ``min_pass_rate``: the share of its tries a case must pass (``--min-pass-rate``, else
      ``[farm].min_pass_rate``, else 1.0); ``baseline``: a run folder, or ``last``, to compare with;
      the run fails its gate when significantly worse (:mod:`farm.gate`).
    - ``retry_errors``: with ``resume``, run again the cases that ended in ``error`` or ``timeout``.
    - ``run``, ``name``, ``json``: the CLI's names (``--run``, ``-n/--name``, ``--json``) of
      ``match``, ``agent`` and ``json_events``.
    """
    from farm._run.setup import check_budget, prepare, recorded_config, recorded_input, resolve_options, selection
    from farm.roles.cache import tally
    from farm.writers import RunInfo, finished_keys, read_run_json
    from farm.writers.jsonl import BROKEN, drop_broken

    match = _alias("match", match, "run", run)
    agent = _alias("agent", agent, "name", name)
    json_events = json_events or json
    previous: RunInfo | None = read_run_json(resume) if resume is not None else None
    input_value = input or (recorded_input(previous) if previous else None)
    if not input_value:
        raise UsageError("no input: give -i/--input (a .jsonl file, a message, agents:<id>, scripts:<id> or -)")
    runs = runs or (previous.runs if previous else 1)
    if runs < 1:
        raise UsageError(f"--runs: {runs} is not a positive number")
    match, tags = selection(previous, match, tags)  # a resume keeps the run's selection
    agents = [agent] if isinstance(agent, str) else list(agent or [])
    if not agents and previous is not None:
        agents = list(previous.agents or ([previous.agent] if previous.agent else []))
    if len(set(agents)) != len(agents):
        raise UsageError(f"-n/--name: {', '.join(agents)} names an agent twice")
    with tally() as driver_calls:  # a generator's call, before the run
        if config is None and previous is not None:
            config = recorded_config(previous)  # the run's own farm.toml, wherever the resume starts
        cfg, agent_id, suite = prepare(input_value, agents[0] if agents else None, config, match, tags, dry_run, cache)
    for other in agents[1:]:
        cfg.agent(other)  # fail early, naming the configured agents
    options = resolve_options(
        previous,
        cfg.farm,
        timeout=timeout,
        turn_timeout=turn_timeout,
        on_missing_input=on_missing_input,
        simulator=simulator,
        match=match,
        tags=tags,
        connector=connector,
        retries=retries,
        golden=golden,
        update_golden=update_golden,
        max_cost=max_cost,
        fail_fast=fail_fast,
        interactive=interactive,
        cache=cache,
        min_pass_rate=min_pass_rate,
        baseline=str(baseline) if baseline is not None else None,
    )
    if not dry_run:
        check_budget(cfg, options.max_cost)
    agents = agents or ([agent_id] if agent_id else [])
    from farm.suite.validation import check_for_run  # every check that needs no agent call (SPEC 2)

    checked: list[str | None] = list(agents) or [agent_id]
    for each in checked:
        check_for_run(suite, cfg, each, simulator=options.simulator, connector=options.connector, dry_run=dry_run)
    if suite.problems and suite.stream is None and not dry_run:  # as pytest stops on a collection error
        raise InputError(suite.problems)
    from farm._run.view import RunView

    view = RunView(console, json_events=json_events, quiet=quiet, verbose=verbose)
    console = view.console
    run_id = (previous.run_id if previous else None) or new_run_id()
    run_dir = Path(resume) if resume is not None else cfg.results_dir / run_id
    stream = suite.stream
    if stream is not None:  # generated cases: they run as their batches arrive (farm.suite.generation)
        stream.default_simulator = options.simulator
        if dry_run:  # the generation alone
            try:
                generate(suite, cfg, cache, console, quiet, options.match, options.tags)
            except KeyboardInterrupt:
                return RunResult(130, interrupted=True)
        else:
            from farm.agents.transport import preload
            from farm.suite.loader import Suite

            preload()  # the generator's first request would import the HTTP transport inside the run
            suite.cases = Suite(stream.open(run_dir)).select(options.match, options.tags or []).cases  # a resumed run's
            if options.match or options.tags:
                stream.keep = lambda cases: Suite(cases).select(options.match, options.tags or []).cases
    if dry_run:
        return RunResult(exit_code=show_dry_run(suite, Path(output) if output else None, console, quiet))

    if not suite.cases and stream is None:
        raise UsageError(f"{suite.description}: no test cases to run")
    from farm.conversation.golden import GoldenRecorder, attach

    recorder = GoldenRecorder(Path(options.update_golden)) if options.update_golden is not None else None
    if recorder is None:  # recording replaces comparing, as a snapshot update does
        every = options.golden is not None
        attach(suite.cases, Path(options.golden) if options.golden is not None else cfg.golden_dir, every=every, input=input_value)
    if interactive and (skip_interactive or not sys.stdin.isatty()):
        raise UsageError("--interactive needs a terminal on stdin (and cannot be combined with --skip-interactive)")
    if agent_id is None:  # script tests, which call agents themselves (ctx.agent), need no agent under test
        agent_id, agents = "", [""]
    connectors = {each: options.connector or (cfg.agent(each).connector if each else None) for each in agents}
    for name in connectors.values():
        if name:
            cfg.connector(name)  # fail early, naming the configured connectors
    connector_name = connectors[agent_id]
    cfg.check_keys()  # a key with a stray newline is a usage error before anything runs

    from farm._run.execution import RunOutputs
    from farm._run.setup import build_plan, execute_viewed
    from farm.engines import StopReason, Terminal, choose_engine, make_engine
    from farm.ratelimit import DEFAULT_PARALLEL, default_parallel

    parallel = parallel or (previous.parallel if previous else None) or sum(
        default_parallel(cfg.connectors[name]) if name else DEFAULT_PARALLEL for name in dict.fromkeys(connectors.values())
    )
    jsonl = Path(output) if output else Path(previous.results if previous and previous.results else run_dir / "results.jsonl")
    if retry_errors and (resume is None or not jsonl.exists()):
        raise UsageError("--retry-errors: give it with --resume RUN_DIR, the run whose errors and timeouts to run again")
    skip_keys = finished_keys(jsonl, agent_id, unless=BROKEN if retry_errors else ()) if resume is not None and jsonl.exists() else set()
    from farm._run.gating import deciding, load_baseline, show_gate

    against = load_baseline(options.baseline, cfg.results_dir, input_value, run_dir)  # a bad one: said before anything runs
    engine_name = choose_engine(
        engine or (previous.engine if previous is not None else None) or cfg.farm.engine or "auto",  # a resume: the run's own
        address=address,
        conversations=max(len(suite.cases), stream.asked if stream else 0) * runs * len(agents) - len(skip_keys),
        resources=any(cfg.agents[each].declares_resources for each in agents if each in cfg.agents),
    )
    plan = build_plan(
        cfg,
        agents,
        suite,
        options,
        run_id,
        parallel=parallel,
        runs=runs,
        skip_keys=skip_keys,
        terminal=Terminal(sys.stdin, Say(console)) if interactive else None,
        driver_calls=driver_calls,
    )
    plan.stream = stream
    info = RunInfo(
        run_id=run_id,
        command=command or ["farm.run", input_value],
        input=input_value,
        cwd=str(Path.cwd()),
        agent=agent_id,
        agents=agents,
        connector=connector_name,
        connectors=connectors,
        config=cfg.safe_dump(),
        options=options,
        generation=generation_record(stream.stats, previous) if stream is not None else None,
        parts=previous.recorded_parts() if previous is not None else [],
    )
    engine_impl = make_engine(engine_name, **({"address": address} if engine_name == "ray" else {}))  # a cluster not there: said before anything runs
    hook_info = {"input": input_value, "agent": agent_id, "agents": agents, "connector": connector_name, "run_id": run_id, "cases": max(len(suite.cases), stream.asked if stream else 0)}
    if before:
        global_hook(cfg, before, {"phase": "before", **hook_info})

    from farm.writers.extra import extra_writers

    asked = {"junit": junit, "html": html, "json_events": json_events}
    reports, streams = extra_writers(asked, run_id, {**hook_info, "runs": runs, "parallel": parallel, "min_pass_rate": options.min_pass_rate}, lambda: info.gate)
    extra = {"Run": run_id, "Engine": engine_name}
    if skip_keys:
        extra["Resuming"] = f"{len(skip_keys)} finished"
    count = len(suite.cases) if stream is None else stream.asked
    view.start(agents, input_value, count, extra, plan.total, progress=not interactive, generating=stream is not None)  # a live bar would draw over the questions
    if stream is not None:
        plan.on_generation = GenerationShown(info, view, previous)
    problems: list[dict[str, Any]] = []  # a bounded sample of what went wrong, for the reporter
    reach = Reach()

    def on_result(result: CaseResult) -> None:
        reach.offer(result)
        if not result.status.ok and len(problems) < 200:
            problems.append({"id": result.id, "name": result.name, "status": result.status.value, "error": result.error})
        if recorder is not None:
            recorder.offer(result)
        view.result(result)

    if retry_errors:
        drop_broken(jsonl)  # their new results replace them: every case once
    outputs = RunOutputs(run_dir=run_dir, jsonl=jsonl, reports=reports, streams=streams, resume=resume is not None, gate=deciding(options, against))
    again = resume_command(run_dir, config, engine_name)
    ended = execute_viewed(plan, outputs, engine_impl, info, view, on_result, again)
    if isinstance(ended, RunResult):
        return ended
    summary = ended
    if stream is not None:
        count_after_run(run_dir, summary, generator_calls(stream, previous))  # made while the run went
        view.stop()
        if stream.stats.kept == 0 and resume is None:
            remove_run(run_dir, jsonl)  # nothing ran: no folder is left as if it had (exit 2, below)
        generated(stream, console, quiet)
    view.stop()
    say_stopped(console, info.stop_reason, summary, options.max_cost, again)  # -q too: why a run ended early
    if reach.unreachable is not None:
        console.print(f"[red]error:[/red] {escape(reach.unreachable)}", soft_wrap=True, highlight=False, emoji=False)
    view.summary(summary, [f"Results: {jsonl}", f"Parquet: {run_dir}/ (cases, turns, assertions)"], reports)
    if recorder is not None and not quiet:
        for line in [recorder.line(), *recorder.problems]:
            console.print(line, soft_wrap=True, highlight=False, markup=False, emoji=False)
    code = show_gate(summary, info, view)  # the summary's last line
    if info.stop_reason == StopReason.MAX_COST:
        code = max(code, 1)
    if reach.unreachable is not None:
        code = 1 if reach.answers else 2  # an endpoint that could not be reached at all: nothing was tested
    if stream is not None and stream.error is not None:
        code = max(code, 1)  # the generator's failure cut the suite short: a role's error, never a green run
    if reporter:
        try:
            with tally() as reporter_calls:
                path = agent_report(cfg, reporter, run_dir, {**hook_info, "counts": summary.count_dict(), "problems": problems}, cache)
            count_after_run(run_dir, summary, reporter_calls)
            if not quiet:
                console.print(f"Report: {path}", soft_wrap=True, highlight=False, markup=False)
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    if after:
        try:
            global_hook(cfg, after, {"phase": "after", **hook_info, "counts": summary.count_dict(), "run_dir": str(run_dir)})
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    return RunResult(code, run_dir, jsonl, summary, engine_name, run_id)


def _alias(keyword: str, value: _T | None, cli_name: str, cli_value: _T | None) -> _T | None:
    """``keyword``'s value, given under its own name or the CLI's; both, and different, is a mistake."""
    if value is not None and cli_value is not None and value != cli_value:
        raise UsageError(f"farm.run: {keyword}={value!r} and {cli_name}={cli_value!r} name the same option; give one")
    return value if value is not None else cli_value


async def run_async(input: str | None = None, **options: Any) -> RunResult:
    """:func:`run` for ``await`` in async code: the run goes on in a thread, the loop stays free."""
    return await asyncio.to_thread(run, input, **options)


