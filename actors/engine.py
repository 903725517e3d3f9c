"""The ray engine: the run's conversations on session actors, on the embedded local Ray
or an existing cluster (``--address``, ``RAY_ADDRESS``).

:meth:`RayEngine.start` connects (starting the embedded Ray when there is no
address), :meth:`RayEngine.run` is the driver (:func:`farm.actors.driver.run_plan`)
plus, in interactive mode, the desk through which session actors ask the
person at this terminal; :meth:`RayEngine.close` stops what ``start`` started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
from farm.actors.cluster import Cluster, check_address, connect
from farm.actors.driver import run_plan
from farm.actors.session import WARM, WARM_ROLES
from farm.actors.traces import Forward, desk_name, start_desk

from farm.engines import RunPlan, StopReason
from farm.errors import UsageError
from farm.results import CaseResult
from farm.results._folder import RAY_LOG

__all__ = ["RayEngine"]


class RayEngine:
    name = "ray"
    starting = "starting Ray…"

    def __init__(self, address: str | None = None):
        self.address = address
        joins = address or os.environ.get("RAY_ADDRESS")
        if joins and not ray.is_initialized():  # a cluster that is not there is a usage error before the run starts
            check_address(joins)
        self.cluster: Cluster | None = None
        self._restore: Callable[[], None] | None = None
        self._traces: str | None = None
        """The run whose remote agent's spans come back through a trace desk (:meth:`span_sink`)."""

    def start(self, run_dir: Path | None = None) -> dict[str, Any]:
        self.cluster = connect(self.address)
        if run_dir is not None:
            self._restore = _ray_messages_to(run_dir / RAY_LOG)
        return {
            "ray": {"address": self.cluster.address, "nodes": self.cluster.nodes, "cpus": self.cluster.cpus},
            "versions": {"ray": ray.__version__},
        }

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None]) -> StopReason | None:
        if plan.replay is not None:  # session actors would call the real agent instead of the recording
            raise UsageError("rescoring runs on the local engine: the ray engine cannot replay a recorded run")
        traces = start_desk(self._traces) if self._traces is not None else None
        try:
            return self._run(plan, on_result, desk_name(self._traces) if self._traces is not None else None)
        finally:
            if traces is not None:
                ray.kill(traces, no_restart=True)

    def _run(self, plan: RunPlan, on_result: Callable[[CaseResult], None], traces: str | None) -> StopReason | None:
        if plan.terminal is None:
            return run_plan(plan, on_result, traces=traces)
        from farm.actors.human import HumanDesk, TerminalDesk

        name = f"farm-human-{plan.settings.run_id}"
        desk = HumanDesk.options(name=name).remote()
        terminal = TerminalDesk(desk, plan.terminal.stdin, plan.terminal.write).start()
        try:
            return run_plan(plan, on_result, human=name, traces=traces)
        finally:
            terminal.stop()
            ray.kill(desk, no_restart=True)

    def span_sink(self, run_id: str) -> Forward:
        """A forwarder to the run's trace desk, which :meth:`run` starts (:mod:`farm.actors.traces`)."""
        self._traces = run_id
        return Forward(run_id)

    def close(self) -> None:
        if self.cluster is not None:
            if self.cluster.started:  # the embedded Ray stops, and the actors kept for a next run with it
                WARM.forget()
                WARM_ROLES.forget()
            self.cluster.shutdown()
            self.cluster = None
        if self._restore is not None:
            self._restore()
            self._restore = None


def _ray_messages_to(path: Path) -> Callable[[], None] | None:
    """Send the messages Ray prints on the driver's console (multi-line dumps) to ``path`` instead,
    saying so in one line the first time. Returns how to undo it (None where this Ray lacks the hook)."""
    worker: Any = getattr(getattr(ray, "_private", None), "worker", None)
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:
        return None
    told = False

    def to_file(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        nonlocal told
        lines = [str(line) for line in data.get("lines") or []]
        with open(path, "a", encoding="utf-8") as file:
            file.writelines(f"({data.get('pid', 'ray')}) {line}\n" for line in lines)
        if lines and not told:
            told = True
            sys.stderr.write(f"Ray reported problems while running; its messages are in {path}\n")

    worker.print_to_stdstream = to_file

    def restore() -> None:
        nonlocal told
        told = True  # the run has ended: a message Ray's log thread hands over late goes to the file, never after the verdict
        worker.print_to_stdstream = original

    return restore
