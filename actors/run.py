"""One farm run, start to end: connect to Ray, run the plan, write every result as it arrives.

:func:`execute` is what ``farm test`` calls and what a notebook can call.
Results go to the JSONL file and the Parquet parts as they arrive; ``run.json``
is written at the start and rewritten at the end. An interrupt (Ctrl-C, or
SIGTERM as ``ray job stop`` sends it) stops the run, keeps every finished
result, and raises :class:`RunInterrupted` naming the folder to resume.
"""

from __future__ import annotations

import platform
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import ray

from actors.cluster import connect
from actors.driver import RunPlan, run_plan
from farm import __version__
from farm.console import Summary
from farm.results import CaseResult
from farm.writers import JSONLWriter, MultiWriter, ParquetWriter, ResultWriter, write_run_json

__all__ = ["RunOutputs", "RunInterrupted", "execute"]


class RunInterrupted(Exception):
    def __init__(self, run_dir: Path, done: int, total: int):
        super().__init__(f"interrupted after {done} of {total} case runs")
        self.run_dir = run_dir
        self.done = done
        self.total = total


@dataclass
class RunOutputs:
    run_dir: Path
    jsonl: Path
    extra_writers: list[ResultWriter] = field(default_factory=list)
    """More writers (JUnit, HTML, NDJSON events) fed with every result."""
    resume: bool = False


def _as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()


def execute(
    plan: RunPlan,
    outputs: RunOutputs,
    *,
    address: str | None = None,
    on_result: Callable[[CaseResult], None] = lambda r: None,
    command_line: list[str] | None = None,
    info: dict[str, Any] | None = None,
    on_connected: Callable[[Any], None] = lambda cluster: None,
) -> Summary:
    """Run ``plan`` and write its results; returns the run's :class:`Summary`."""
    started = time.time()
    run_info: dict[str, Any] = {
        "run_id": plan.settings.run_id,
        "status": "running",
        "started_at": started,
        "command": command_line or sys.argv,
        "agent": plan.settings.agent_id,
        "cases": len(plan.cases),
        "runs": plan.runs,
        "parallel": plan.parallel,
        "results": str(outputs.jsonl),
        "config": plan.config.safe_dump(),
        "versions": {
            "farm": __version__,
            "ray": ray.__version__,
            "python": platform.python_version(),
        },
        **(info or {}),
    }
    write_run_json(outputs.run_dir, run_info)
    writers = MultiWriter([JSONLWriter(outputs.jsonl, append=outputs.resume), ParquetWriter(outputs.run_dir), *outputs.extra_writers])
    summary = Summary()
    total = len(plan.cases) * plan.runs - len(plan.skip_keys)

    timings: dict[str, float] = {}
    """Seconds from the start of the run: Ray ready, first and last result, outputs closed."""

    def record(result: CaseResult) -> None:
        writers.write(result)
        summary.add(result)
        on_result(result)
        timings["last_result_s"] = round(time.time() - started, 3)
        timings.setdefault("first_result_s", timings["last_result_s"])

    cluster = connect(address)
    timings["ray_ready_s"] = round(time.time() - started, 3)
    # SIGTERM is what `ray job stop` sends; SIGINT is set too, because a process started in
    # the background by a shell script inherits SIGINT ignored, and `kill -INT` must still stop it
    previous = {}
    if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
        previous = {sig: signal.signal(sig, _as_interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    interrupted = False
    try:
        run_info["ray"] = {"address": cluster.address, "nodes": cluster.nodes, "cpus": cluster.cpus}
        on_connected(cluster)
        run_plan(plan, record)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        writers.close()
        summary.wall_seconds = time.time() - started
        timings["closed_s"] = round(summary.wall_seconds, 3)
        run_info.update(
            status="interrupted" if interrupted else "finished",
            ended_at=time.time(),
            counts=summary.count_dict(),
            timings=timings,
        )
        write_run_json(outputs.run_dir, run_info)
        cluster.shutdown()
    if interrupted:
        raise RunInterrupted(outputs.run_dir, summary.total, total)
    return summary
