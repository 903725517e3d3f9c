"""The actors of one run on Ray: its session actors, role pools and rate limiters.

:func:`start_actors` places and starts them for a :class:`~farm.engines.RunPlan` (the session
actors and the role pools this process kept from its last run on this cluster serve again);
the driver (:mod:`farm.actors.driver`) sends them jobs and preparations through
:class:`RunActors`; :meth:`RunActors.release` keeps the healthy ones for the next run when the
run ended, and kills them when it did not (an interrupt cancels what is in flight that way).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import ray
from farm.actors.limiter import start_limiters
from farm.actors.placement import (
    Node,
    SessionSpec,
    conversations,
    plan_session_actors,
    start_session_actors,
    wait_until_placeable,
    warm_key,
)
from farm.actors.roles import RoleSetup, RunRoles
from farm.actors.session import WARM, SessionSetup

from farm.config import AgentConfig
from farm.engines import Job, RunPlan, Worker
from farm.engines.health import WorkerHealth

__all__ = ["RunActors", "start_actors"]

#: A cluster with fewer CPUs gets one actor per role pool (one asyncio actor answers hundreds of
#: role calls at once; a second only costs a process there), a larger one two.
POOL_PAIR_FROM_CPUS = 4


@dataclass
class RunActors:
    """A run's actors, started; the workers of its scheduler are its session actors."""

    token: str
    """This call's (a resumed run keeps its run id): every call of the run carries it."""
    specs: list[SessionSpec]
    handles: dict[str, Any]
    setups: dict[str, SessionSetup]
    prepared: dict[str, Any]
    """By session actor, the reference that answers once it is prepared for the run."""
    workers: list[Worker]
    roles: RunRoles
    limiters: dict[str, Any]
    stopped: bool = False

    def run(self, worker: str, job: Job) -> Any:
        """Send ``job`` to ``worker``'s actor; the reference to its result."""
        return self.handles[worker].run.remote(self.token, job.payload, job.run_index, job.agent)

    def prepare(self, worker: str) -> Hashable:
        """Prepare ``worker``'s actor for the run again (it died, or restarted unseen)."""
        ref: Hashable = self.handles[worker].prepare.remote(self.setups[worker])
        return ref

    def stop(self) -> None:
        """The calls queued on the session actors never start (told once)."""
        if not self.stopped:
            self.stopped = True
            for handle in self.handles.values():
                handle.stop.remote(self.token)

    def release(self, keep: bool, health: WorkerHealth) -> None:
        """Keep the healthy plain session actors and the role pools for this process's next run on
        this cluster (``keep``: the run ended), and kill the others and the limiters."""
        for spec in self.specs:
            handle = self.handles[spec.name]
            if keep and health.healthy(spec.name) and not spec.declared:
                handle.retire.remote(self.token)
                WARM.keep(warm_key(spec, health.node_of[spec.name]), handle)
            else:
                ray.kill(handle, no_restart=True)
        self.roles.release(keep)
        for handle in self.limiters.values():
            ray.kill(handle, no_restart=True)


def start_actors(plan: RunPlan, queue_share: float, human: str | None, traces: str | None = None) -> RunActors:
    """Place and start ``plan``'s actors (actors/placement.py); ``queue_share``: calls a session
    actor holds queued beyond those it runs; ``human``: the actor that answers interactive questions;
    ``traces``: the run's trace desk."""
    agents = [plan.config.agents.get(agent) or AgentConfig(id=agent) for agent in plan.agents]
    if any(agent.resources is not None for agent in agents):
        WARM.clear()  # its actors are planned on whole CPUs: the kept ones' slivers would leave none
    nodes = wait_until_placeable(agents, plan.config.farm.autoscaler_wait, say=lambda line: print(line, file=sys.stderr))
    specs = plan_session_actors(agents, plan.parallel, nodes, conversations(plan), plan.actors)
    scope = plan.settings.run_id or uuid.uuid4().hex[:8]
    limiters, limits = start_limiters(plan.config, list(plan.config.connectors), scope)
    token = uuid.uuid4().hex
    attributing = any(settings.attribute for settings in plan.agent_settings.values())
    roles = RunRoles(RoleSetup(token, plan.config, limits, plan.settings.cache), scope, _pool_size(nodes, specs), not plan.feed.closed, attributing)
    setups = {
        spec.name: SessionSetup(token, spec.name, plan.config, plan.agent_settings, plan.connector_override, spec.concurrency, roles.names, limits, human, traces)
        for spec in specs
    }
    handles, prepared = start_session_actors(specs, queue_share, lambda spec: setups[spec.name])
    # a job of agent A goes only to an actor that serves A (one with declared resources serves its agent alone)
    workers = [Worker(spec.name, spec.slots(queue_share), frozenset(spec.agents)) for spec in specs]
    return RunActors(token, specs, handles, setups, prepared, workers, roles, limiters)


def _pool_size(nodes: list[Node], specs: list[SessionSpec]) -> int:
    return 1 if sum(n.total.get("CPU", 0.0) for n in nodes) < POOL_PAIR_FROM_CPUS else max(1, min(2, len(specs)))
