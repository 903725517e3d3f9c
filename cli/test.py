"""``farm test``: run a suite against an agent (SPEC section 2)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from farm.durations import parse_duration
from farm.errors import FarmError, UsageError

if TYPE_CHECKING:
    from farm.config import FarmConfig
    from farm.loader import Suite

__all__ = ["test", "prepare", "new_run_id"]


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]


def _duration(flag: str, value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def test(
    input: Annotated[Optional[str], typer.Option("-i", "--input", help="A .jsonl/.json file, a message, agents:<id>?k=v, scripts:<id>?k=v, scripts.<module>, or - for stdin.")] = None,
    name: Annotated[Optional[str], typer.Option("-n", "--name", help="The agent under test (default: [farm].default_agent).")] = None,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Results JSONL path (default: <results_dir>/<run_id>/results.jsonl).")] = None,
    connector: Annotated[Optional[str], typer.Option("-c", "--connector", help="Override the target agent's connector.")] = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Show every turn of every case.")] = False,
    interactive: Annotated[bool, typer.Option("--interactive", help="A person answers on this terminal when the agent awaits input.")] = False,
    skip_interactive: Annotated[Optional[bool], typer.Option("--skip-interactive", help="Never wait for a person (default when stdin is not a terminal).")] = None,
    on_missing_input: Annotated[str, typer.Option("--on-missing-input", help="skip or fail when the agent awaits input and nothing can answer.")] = "skip",
    simulator: Annotated[Optional[str], typer.Option("--simulator", help="Default simulator agent id for dynamic cases.")] = None,
    timeout: Annotated[str, typer.Option("--timeout", help="Per-case timeout (30s, 2m, 1h).")] = "5m",
    turn_timeout: Annotated[str, typer.Option("--turn-timeout", help="Per-turn timeout.")] = "2m",
    parallel: Annotated[Optional[int], typer.Option("--parallel", min=1, help="Max conversations in flight (default: from the connector's limits).")] = None,
    fail_fast: Annotated[bool, typer.Option("--fail-fast", help="Stop dispatching after the first failed case.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Load and validate the cases, print them (and write them with -o); run nothing.")] = False,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Run every case N times (stability).")] = 1,
    run: Annotated[Optional[str], typer.Option("--run", help="Only cases whose id matches this regex.")] = None,
    tag: Annotated[Optional[list[str]], typer.Option("--tag", help="Only cases carrying this tag (repeatable).")] = None,
    config: Annotated[Optional[str], typer.Option("--config", help="Path to farm.toml.")] = None,
    address: Annotated[Optional[str], typer.Option("--address", help="Ray cluster address (auto, ray://host:10001); default: embedded local Ray.")] = None,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Continue an interrupted run in this folder.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Also write JUnit XML here.")] = None,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML report here.")] = None,
    json_events: Annotated[bool, typer.Option("--json", help="NDJSON events on stdout instead of the console tree.")] = False,
    before: Annotated[Optional[str], typer.Option("--before", help="Global hook run once before any case (scripts:<id>); its failure stops the run.")] = None,
    reporter_agent: Annotated[Optional[str], typer.Option("-r", "--reporter", help="A reporter agent that writes report.md from the run's summary.")] = None,
    after: Annotated[Optional[str], typer.Option("--after", help="Global hook run once after every case (scripts:<id>); it gets the summary.")] = None,
) -> None:
    """Run test cases against an agent, in parallel on Ray."""
    from cli.app import fail

    try:
        code = _test(**locals())
    except FarmError as exc:
        fail(exc)
    raise typer.Exit(code)


def _override(cfg: FarmConfig, dotted: str, value: object) -> None:
    """Set ``connectors.demo.base_url``-style paths on the loaded config."""
    *path, last = dotted.split(".")
    target: object = cfg
    for part in path:
        target = target[part] if isinstance(target, dict) else getattr(target, part)
    setattr(target, last, value)


def prepare(input: str, name: str | None, config: str | None, run: str | None, tag: list[str] | None, dry_run: bool, overrides: dict | None = None, simulator: str | None = None, connector: str | None = None) -> tuple[FarmConfig, str | None, Suite]:
    """Config, target agent id and the selected cases, as ``farm test`` resolves them."""
    from farm.config import find_config, load_config
    from farm.inputs import input_path, resolve_input

    cfg = load_config(find_config(config, input_path(input)))
    for dotted, value in (overrides or {}).items():
        _override(cfg, dotted, value)
    agent_id = name or cfg.farm.default_agent
    if agent_id is None and not dry_run and not input.startswith("scripts."):
        raise UsageError("no agent to test: give -n/--name or set [farm].default_agent in farm.toml")
    if agent_id is not None and not dry_run:
        cfg.agent(agent_id)  # fail early, naming the configured agents
    suite = resolve_input(input, cfg, agent_id, compact=not dry_run).select(run, tag or [])
    from farm.validation import check_for_run  # every check that needs no agent call (SPEC 2)
    check_for_run(suite, cfg, agent_id, simulator=simulator, connector=connector, dry_run=dry_run)
    return cfg, agent_id, suite


def _test(**o) -> int:
    from farm.writers import finished_keys, read_run_json

    if o["on_missing_input"] not in ("skip", "fail"):
        raise UsageError(f"--on-missing-input: '{o['on_missing_input']}' is not one of: skip, fail")
    case_timeout = _duration("--timeout", o["timeout"])
    turn_timeout = _duration("--turn-timeout", o["turn_timeout"])

    resume_dir: Path | None = o["resume"]
    previous: dict = {}
    if resume_dir is not None:
        previous = read_run_json(resume_dir)
    input_value = o["input"] or previous.get("input")
    if not input_value:
        raise UsageError("no input: give -i/--input (a .jsonl file, a message, agents:<id>, scripts:<id> or -)")
    cfg, agent_id, suite = prepare(input_value, o["name"] or previous.get("agent"), o["config"], o["run"], o["tag"], o["dry_run"], o.get("_overrides"), o["simulator"], o["connector"])

    quiet = o["json_events"]
    console = Console(stderr=quiet, highlight=False)
    if o["dry_run"]:
        return _dry_run(suite, o["output"], console)

    from actors.driver import RunPlan
    from actors.limiter import default_parallel
    from actors.run import RunInterrupted, RunOutputs, execute
    from farm.console import ConsoleReporter
    from farm.runner import RunSettings

    if not suite.cases:
        raise UsageError(f"{suite.description}: no test cases to run")
    if o["interactive"] and (o["skip_interactive"] or not sys.stdin.isatty()):
        raise UsageError("--interactive needs a terminal on stdin (and cannot be combined with --skip-interactive)")

    assert agent_id is not None
    agent = cfg.agent(agent_id)
    connector_name = o["connector"] or agent.connector
    if connector_name:
        cfg.connector(connector_name)
    parallel = o["parallel"] or (default_parallel(cfg.connectors[connector_name]) if connector_name else 64)

    run_id = previous.get("run_id") or new_run_id()
    run_dir = resume_dir or (cfg.results_dir / run_id)
    jsonl = o["output"] or Path(previous.get("results") or run_dir / "results.jsonl")
    skip_keys = finished_keys(jsonl) if resume_dir is not None and jsonl.exists() else set()

    settings = RunSettings(
        agent_id=agent_id,
        run_id=run_id,
        on_missing_input=o["on_missing_input"],
        case_timeout=case_timeout,
        turn_timeout=turn_timeout,
        interactive=o["interactive"],
        default_simulator=o["simulator"] or cfg.farm.simulator,
        input_tools=tuple(agent.input_tools),
        agent_tool_mocks=dict(agent.tool_mocks),
    )
    cases = suite.cases
    plan = RunPlan(
        config=cfg,
        cases=cases,
        settings=settings,
        parallel=parallel,
        runs=o["runs"],
        fail_fast=o["fail_fast"],
        connector_override=o["connector"],
        actors=cfg.farm.actors,
        skip_keys=skip_keys,
    )
    info = {"input": input_value, "agent": agent_id, "connector": connector_name, "run_id": run_id, "cases": len(cases)}
    if o.get("before"):
        _global_hook(cfg, o["before"], {"phase": "before", **info})
    reporter = ConsoleReporter(console, verbose=o["verbose"])
    extra_writers = _extra_writers(o, run_id, {**info, "runs": o["runs"], "parallel": parallel})
    total = len(cases) * o["runs"] - len(skip_keys)
    if not quiet:
        reporter.header(agent_id, input_value, len(cases), {"Run": run_id, **({"Resuming": f"{len(skip_keys)} finished"} if skip_keys else {})})
        if not o["interactive"]:  # a live bar would draw over the questions
            reporter.start_progress(total)

    problems: list[dict] = []  # a bounded sample of what went wrong, for --reporter

    def on_result(result) -> None:
        if not result.status.ok and len(problems) < 200:
            problems.append({"id": result.id, "name": result.name, "status": result.status.value, "error": result.error})
        if not quiet:
            reporter.advance(result)
            reporter.case(result)

    desks: list = []

    def on_connected(cluster) -> None:
        if o["interactive"]:
            from actors.human import HumanDesk, TerminalDesk

            plan.human = f"farm-human-{run_id}"
            desk = HumanDesk.options(name=plan.human).remote()
            desks.append(TerminalDesk(desk, sys.stdin, lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True, end="" if text.endswith(": ") else "\n")).start())

    try:
        summary = execute(
            plan,
            RunOutputs(run_dir=run_dir, jsonl=jsonl, extra_writers=extra_writers, resume=resume_dir is not None),
            address=o["address"],
            on_result=on_result,
            info=info,
            on_connected=on_connected,
        )
    except RunInterrupted as stop:
        reporter.stop_progress()
        for desk in desks:
            desk.stop()
        console.print(f"\n[yellow]Interrupted[/yellow]: {stop.done} of {stop.total} case runs finished; their results are kept.", soft_wrap=True)
        console.print(f"Resume with: farm test --resume {stop.run_dir}" + (f" --config {o['config']}" if o["config"] else ""), soft_wrap=True, markup=False)
        return 130
    reporter.stop_progress()
    for desk in desks:
        desk.stop()
    outputs = [f"Results: {jsonl}", f"Parquet: {run_dir}/ (cases, turns, assertions)"]
    outputs += [f"{w.label}: {w.path}" for w in extra_writers if hasattr(w, "label")]
    if not quiet:
        reporter.summary(summary, outputs)
    code = summary.exit_code
    if o.get("reporter_agent"):
        try:
            path = _agent_report(cfg, o["reporter_agent"], run_dir, {**info, "counts": summary.count_dict(), "problems": problems})
            console.print(f"Report: {path}", soft_wrap=True, highlight=False)
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    if o.get("after"):
        try:
            _global_hook(cfg, o["after"], {"phase": "after", **info, "counts": summary.count_dict(), "run_dir": str(run_dir)})
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            code = 1
    return code


def _agent_report(cfg: FarmConfig, agent_id: str, run_dir: Path, run_summary: dict) -> Path:
    """Ask the reporter agent for a Markdown report of the run; write it beside the results."""
    from farm.roles import RolePlayer

    player = RolePlayer.from_config("reporter", cfg, agent_id)
    try:
        text = player.run_once(lambda p: p.report(run_summary))
    except Exception as exc:
        raise UsageError(f"--reporter {agent_id}: the reporter failed: {type(exc).__name__}: {exc}") from None
    path = run_dir / "report.md"
    path.write_text(text, encoding="utf-8")
    return path


def _global_hook(cfg: FarmConfig, reference: str, payload: dict) -> None:
    """Run a ``--before``/``--after`` hook in this process; its failure is one sentence."""
    import asyncio

    from farm.scripts import ScriptResolver, call_maybe_async

    fn = ScriptResolver(cfg.scripts_dir).resolve(reference)
    try:
        asyncio.run(call_maybe_async(fn, payload))
    except Exception as exc:
        raise UsageError(f"global {payload['phase']} hook {reference} failed: {type(exc).__name__}: {exc}") from None


def _extra_writers(o: dict, run_id: str, info: dict) -> list:
    writers = []
    if o["json_events"]:
        from farm.events import EventWriter

        events = EventWriter(sys.stdout, run_id)
        events.start(info)
        writers.append(events)
    if o["junit"]:
        from farm.reports.junit import JUnitWriter

        writers.append(JUnitWriter(o["junit"], run_id))
    if o["html"]:
        from farm.reports.html import HTMLWriter

        writers.append(HTMLWriter(o["html"], run_id))
    return writers


def _dry_run(suite: Suite, output: Path | None, console: Console) -> int:
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
    for problem in suite.problems:
        console.print(f"[red]error:[/red] {escape(problem)}", highlight=False, emoji=False)
    for warning in suite.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, emoji=False)
    valid = sum(1 for c in suite.cases if c.ok)
    console.print(escape(f"{valid} valid case(s), {len(suite.problems)} with problems" + (f"; written to {output}" if output else "")), highlight=False, emoji=False)
    return 2 if suite.problems else 0
