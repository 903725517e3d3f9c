"""The ray engine: the run's conversations on session actors, on the embedded local Ray
or an existing cluster (``--address``, ``RAY_ADDRESS``).

:meth:`RayEngine.start` connects (starting the embedded Ray when there is no
address), :meth:`RayEngine.run` is the driver (:func:`actors.driver.run_plan`)
plus, in interactive mode, the desk through which session actors ask the
person at this terminal; :meth:`RayEngine.close` stops what ``start`` started.
"""

from __future__ import annotations

from typing import Any, Callable

import ray

from actors.cluster import Cluster, connect
from actors.driver import run_plan
from farm.engines import RunPlan
from farm.results import CaseResult

__all__ = ["RayEngine"]


class RayEngine:
    name = "ray"
    starting = "starting Ray…"

    def __init__(self, address: str | None = None):
        self.address = address
        self.cluster: Cluster | None = None

    def start(self) -> dict[str, Any]:
        self.cluster = connect(self.address)
        return {
            "ray": {"address": self.cluster.address, "nodes": self.cluster.nodes, "cpus": self.cluster.cpus},
            "versions": {"ray": ray.__version__},
        }

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None], should_stop: Callable[[], bool] = lambda: False) -> None:
        if plan.terminal is None:
            run_plan(plan, on_result, should_stop)
            return
        from actors.human import HumanDesk, TerminalDesk

        name = f"farm-human-{plan.settings.run_id}"
        desk = HumanDesk.options(name=name).remote()
        terminal = TerminalDesk(desk, plan.terminal.stdin, plan.terminal.write).start()
        try:
            run_plan(plan, on_result, should_stop, human=name)
        finally:
            terminal.stop()
            ray.kill(desk, no_restart=True)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None
