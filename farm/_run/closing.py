"""What :func:`farm.run` does around the engine's part: the dry run's listing, the global hooks,
what watches each result, the reporter agent, the lines that say why a run stopped, and the role
calls counted after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from farm.errors import UsageError

if TYPE_CHECKING:
    from farm._run.phases import Planned
    from farm.config import FarmConfig
    from farm.results import CaseResult
    from farm.roles.cache import CallTally
    from farm.suite.loader import Suite
    from farm.summary import Summary

__all__ = [
    "Reach",
    "Say",
    "Watch",
    "agent_report",
    "report_and_after",
    "count_after_run",
    "global_hook",
    "remove_run",
    "resume_command",
    "say_stopped",
    "show_dry_run",
]


class Reach:
    """What the results say of the agents' endpoints: the sentence of the first case that ended on
    an unreachable one (the run stopped there), and whether any case got an answer."""

    def __init__(self) -> None:
        self.unreachable: str | None = None
        self.answers = False

    def offer(self, result: CaseResult) -> None:
        if result.ended_by == "unreachable" and self.unreachable is None:
            self.unreachable = result.error
        self.answers = self.answers or any(turn.replies for turn in result.turns)


class Watch:
    """Told each result as it finishes: the endpoints' reach (not in a rescore, which calls none),
    a bounded sample of what went wrong (for the reporter), the golden recorder and the console."""

    def __init__(self, planned: Planned):
        self.reach = Reach()
        self.replayed = planned.prepared.rescoring is not None
        self.problems: list[dict[str, Any]] = []
        self.recorder = planned.recorder
        self.view = planned.prepared.view

    def __call__(self, result: CaseResult) -> None:
        if not self.replayed:
            self.reach.offer(result)
        if not result.status.ok and len(self.problems) < 200:
            self.problems.append({"id": result.id, "name": result.name, "status": result.status.value, "error": result.error})
        if self.recorder is not None:
            self.recorder.offer(result)
        self.view.result(result)


def say_stopped(console: Console, reason: str | None, summary: Summary, max_cost: float | None, again: str, not_run: int) -> None:
    """Why the run dispatched no more (``--max-cost``, ``--fail-fast``) while ``not_run`` case runs
    were still to start, in one line; nothing when it ran to its end. A ``--fail-fast`` that came
    once every case run had started (they start at once up to ``--parallel``) says that none was left out."""
    from farm.engines import StopReason
    from farm.wording import plural

    finished = plural(summary.total, "case run")
    if reason == StopReason.FAIL_FAST and not not_run:
        console.print(
            f"[yellow]--fail-fast:[/yellow] a case did not pass once every case run had started: all {finished} finished "
            "(--parallel starts that many at once; a lower one leaves the rest unstarted)",
            soft_wrap=True,
            highlight=False,
        )
        return
    if reason == StopReason.MAX_COST:
        why = f"the run spent its budget of ${max_cost:g}"
        then = f"; resume with: {escape(again)} --max-cost <more>"
    elif reason == StopReason.FAIL_FAST:
        why, then = "--fail-fast: a case did not pass", ""
    else:
        return
    if not not_run:
        return
    console.print(
        f"[yellow]stopped:[/yellow] {why}: {finished} finished, the rest were not started{then}",
        soft_wrap=True,
        highlight=False,
    )


def resume_command(run_dir: Path, config: str | Path | FarmConfig | None, engine: str) -> str:
    """The command that finishes this run: its folder, its ``farm.toml`` when one was named, and
    its engine when that is not the local one (a resume goes on with it anyway)."""
    command = f"farm test --resume {run_dir}"
    if isinstance(config, (str, Path)):
        command += f" --config {config}"
    return command + (f" --engine {engine}" if engine != "local" else "")


class Say:
    """Interactive mode's lines on the console, printed literally."""

    def __init__(self, console: Console):
        self.console = console

    def __call__(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True, end="" if text.endswith(": ") else "\n")


def agent_report(cfg: FarmConfig, agent_id: str, run_dir: Path, run_summary: dict[str, Any], cache: bool = True) -> Path:
    """Ask the reporter agent for a Markdown report of the run; write it beside the results."""
    from farm.roles.cache import RoleCache
    from farm.roles.player import RolePlayer

    player = RolePlayer.from_config("reporter", cfg, agent_id, cache=RoleCache.for_config(cfg) if cache else None)
    try:
        text = player.run_once(lambda p: p.report(run_summary))
    except Exception as exc:
        raise UsageError(f"--reporter {agent_id}: the reporter failed: {type(exc).__name__}: {exc}") from None
    path = run_dir / "report.md"
    path.write_text(text, encoding="utf-8")
    return path


def count_after_run(run_dir: Path, summary: Summary, calls: CallTally) -> None:
    """Add role calls made after the run (the reporter's) to its summary and ``run.json``."""
    from farm.writers import read_run_json, write_run_json

    summary.add_calls(calls)
    info = read_run_json(run_dir)
    info.role_cache = summary.role_cache()
    info.cost = summary.cost()
    write_run_json(run_dir, info)


def remove_run(run_dir: Path, jsonl: Path) -> None:
    """Remove the folder of a run that ran nothing, and its results file when ``-o`` put it elsewhere."""
    import shutil

    shutil.rmtree(run_dir, ignore_errors=True)
    if jsonl.exists() and not jsonl.stat().st_size:
        jsonl.unlink()


def global_hook(cfg: FarmConfig, reference: str, payload: dict[str, Any]) -> None:
    """Run a ``before``/``after`` hook in this process; its failure is one sentence."""
    from farm.aio import run_sync
    from farm.scripts import ScriptResolver, call_maybe_async

    fn = ScriptResolver(cfg.scripts_dir).resolve(reference)
    try:
        run_sync(call_maybe_async(fn, payload))
    except Exception as exc:
        raise UsageError(f"global {payload['phase']} hook {reference} failed: {type(exc).__name__}: {exc}") from None


def show_dry_run(suite: Suite, output: Path | None, console: Console, quiet: bool) -> int:
    lines = []
    for loaded in (c.materialized() for c in suite.cases):
        if loaded.case is not None:
            data = loaded.case.model_dump(mode="json", exclude_unset=True)  # "value": null is not a value left out
            lines.append(json.dumps(data, ensure_ascii=False))
    for line in lines:
        print(line)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    for problem in suite.problems:
        console.print(f"[red]error:[/red] {escape(problem)}", highlight=False, emoji=False)
    if not quiet:
        for warning in suite.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False, emoji=False)
        valid = sum(1 for c in suite.cases if c.ok)
        line = f"{valid} valid case(s), {sum(1 for c in suite.cases if c.error)} with problems" + (
            f"; written to {output}" if output else ""
        )
        console.print(escape(line), highlight=False, emoji=False)
    return 2 if suite.problems else 0


def report_and_after(planned: Planned, summary: Summary, watch: Watch) -> bool:
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
            global_hook(
                prepared.cfg,
                options.after,
                {"phase": "after", **planned.hook_info, "counts": summary.count_dict(), "run_dir": str(run_dir)},
            )
        except UsageError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, emoji=False)
            done = False
    return done
