"""Session actors: each conversation lives on one of them from its first turn to its last.

One Ray call per conversation (not per turn); an actor serves many
conversations at once on its event loop, all sending through one HTTP
connection pool sized to them.

A session actor is started bare and told what to run by :meth:`SessionActor.prepare`
(the run's config, agents, pools and limits), so that it can serve more than one run:
a driver process that runs again on the same cluster (a notebook, a script calling
``farm.run`` in a loop, a test session) takes the plain actors its last run left
(:class:`WarmActors`) instead of starting new processes, about a second of CPU
each. Every call names the run it belongs to; an actor that restarted (it has no
run) or serves another one answers :data:`UNPREPARED`, and the driver prepares it
again before it gets a job.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray

from farm.agents.transport import HTTPClient, preload
from farm.config import FarmConfig
from farm.conversation.settings import RunSettings
from farm.engines.worker import CaseWorker
from farm.loaded import LoadedCase
from farm.results import CaseResult

if TYPE_CHECKING:
    from farm.actors.limiter import LimiterPlan
    from farm.actors.roles import RolePools

__all__ = ["KEPT_ANSWER_S", "UNPREPARED", "WARM", "WARM_ROLES", "SessionActor", "SessionSetup", "WarmActors", "kill"]

UNPREPARED = "unprepared"
"""What :meth:`SessionActor.run` (and a role actor's call) answers when it was not prepared for that run."""

PREPARE_WAIT_S = 10.0
"""How long a call waits for its run's preparation (Ray may start it before the preparation
sent ahead of it), before it answers :data:`UNPREPARED` (seconds)."""

KEPT_ANSWER_S = 5.0
"""How long an actor kept from the last run may take to answer before a new one replaces it (seconds)."""


@dataclass(frozen=True)
class SessionSetup:
    """What one session actor needs for one run (:meth:`SessionActor.prepare`)."""

    run: str
    """The run's token: every call of the run carries it."""
    name: str
    config: FarmConfig
    agent_settings: dict[str, RunSettings]
    connector_override: str | None
    concurrency: int
    pools: RolePools
    limits: LimiterPlan | None = None
    human: str | None = None
    traces: str | None = None
    """The name of the run's trace desk (:mod:`farm.actors.traces`), when a remote agent's spans come back."""


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class SessionActor:
    """Runs conversations of every agent it serves, ``concurrency`` at once; calls beyond them wait
    here ready to start, so that a slot that frees refills without a round trip through the driver."""

    def __init__(self, prepare_wait: float = PREPARE_WAIT_S) -> None:
        self.prepare_wait = prepare_wait
        self.run_id: str | None = None
        self.worker: CaseWorker | None = None
        self.http: HTTPClient | None = None
        self.slots = asyncio.Semaphore(1)
        self.stopping = False
        self.human: Any = None
        self._prepared = asyncio.Condition()

    async def prepare(self, setup: SessionSetup) -> str:
        """Serve the run of ``setup`` from now on (the previous run's clients are closed); returns the
        id of the node it runs on. Asked again for the same run, it changes nothing (its
        conversations go on)."""
        from farm.actors.limiter import limiter_factory
        from farm.actors.roles import PoolRoles
        from farm.actors.traces import DeskSpans

        if setup.run == self.run_id and self.worker is not None:
            return ray.get_runtime_context().get_node_id()
        old = (self.worker, self.http)
        config = setup.config
        if any(config.agents.get(agent) is None or config.agents[agent].kind != "python" for agent in setup.agent_settings):
            preload()  # an HTTP agent: import aiohttp before the first conversation, not in it
        self.http = HTTPClient(setup.concurrency)
        self.slots = asyncio.Semaphore(setup.concurrency)
        self.stopping = False
        self.human = ray.get_actor(setup.human) if setup.human else None
        self.worker = CaseWorker(
            config,
            setup.agent_settings,
            worker=f"{setup.name}@{ray.util.get_node_ip_address()}:{os.getpid()}",
            roles=PoolRoles(setup.pools),
            http=self.http,
            limiter_for=limiter_factory(setup.limits),
            connector_override=setup.connector_override,
            ask_human=self._ask_human if setup.human is not None else None,
            received_spans=DeskSpans(setup.traces) if setup.traces else None,
        )
        self.run_id = setup.run
        async with self._prepared:
            self._prepared.notify_all()
        await _close(*old)
        return ray.get_runtime_context().get_node_id()

    async def _ask_human(self, request: Any) -> str | None:
        return await self.human.ask.remote(request)

    async def run(self, run_id: str, loaded: LoadedCase, run_index: int, agent: str) -> CaseResult | str | None:
        """Run one conversation; None when it waited for a slot and the run stopped meanwhile
        (see :meth:`stop`); :data:`UNPREPARED` when this actor does not serve ``run_id``."""
        if not await self._ready_for(run_id):
            return UNPREPARED
        worker = self.worker
        assert worker is not None
        waited = self.slots.locked()  # beyond this actor's share: queued, not yet dispatched
        async with self.slots:
            if waited and self.stopping:
                return None
            return await worker.run(loaded, run_index, agent)

    async def _ready_for(self, run_id: str) -> bool:
        """Whether this actor serves ``run_id``, once the preparation sent ahead of this call came."""
        def ready() -> bool:
            return run_id == self.run_id and self.worker is not None

        if ready():
            return True
        async with self._prepared:
            try:
                await asyncio.wait_for(self._prepared.wait_for(ready), self.prepare_wait)
            except TimeoutError:
                return False
        return True

    async def stop(self, run_id: str) -> None:
        """Start none of the calls queued beyond this actor's share (``--fail-fast``): they return None."""
        if run_id == self.run_id:
            self.stopping = True

    async def retire(self, run_id: str) -> None:
        """The run is over: close its clients (unless a newer run prepared this actor meanwhile)."""
        if run_id == self.run_id:
            old = (self.worker, self.http)
            self.run_id, self.worker, self.http = None, None, None
            await _close(*old)

    async def pid(self) -> int:
        return os.getpid()


async def _close(worker: CaseWorker | None, http: HTTPClient | None) -> None:
    if worker is not None:
        await worker.aclose()
    if http is not None:
        await http.aclose()


class WarmActors:
    """Actors between the runs of this driver process, ready for the next run: plain session
    actors (:data:`WARM`) and role pool actors (:data:`WARM_ROLES`).

    Kept only while the process stays connected to the same cluster (Ray's job), and
    for at most :attr:`IDLE_SECONDS` (a timer stops them then: a plain session actor holds
    a sliver of a CPU, which keeps a whole CPU of its node from work that needs one).
    Session actors with an agent's declared resources are never kept, and a run of such
    an agent first stops the kept ones (:meth:`clear`), so that its actors get whole CPUs.
    """

    IDLE_SECONDS = 60.0

    def __init__(self) -> None:
        self._cluster: tuple[str, str] | None = None
        self._idle: list[tuple[Any, str, Any, float]] = []  # (key, name, handle, idle since)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    @staticmethod
    def _this_cluster() -> tuple[str, str]:
        context = ray.get_runtime_context()
        return context.gcs_address, context.get_job_id()

    def _same_cluster(self) -> None:
        cluster = self._this_cluster()
        if cluster != self._cluster:
            self._idle, self._cluster = [], cluster  # another Ray: those handles went with the old one

    def take(self, key: Any) -> tuple[str, Any] | None:
        """``(name, handle)`` of the last actor kept under ``key``, or None (the last: those kept
        longest expire first)."""
        with self._lock:
            self._same_cluster()
            for entry in reversed(self._idle):
                if entry[0] == key:
                    self._idle.remove(entry)
                    return entry[1], entry[2]
        return None

    def keep(self, key: Any, handle: Any, name: str = "") -> None:
        with self._lock:
            self._same_cluster()
            self._idle.append((key, name, handle, time.monotonic()))
            self._expire_later()

    def clear(self) -> None:
        """Stop every kept actor."""
        with self._lock:
            idle, self._idle = self._idle, []
        for entry in idle:
            kill(entry[2])

    def forget(self) -> None:
        """Drop every kept actor without a word to Ray (it is about to stop, or stopped)."""
        with self._lock:
            self._idle, self._cluster = [], None

    def _expire_later(self) -> None:
        if self._timer is None and self._idle:
            wait = max(0.0, min(entry[3] for entry in self._idle) + self.IDLE_SECONDS - time.monotonic())
            self._timer = threading.Timer(wait + 0.1, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._timer = None
            stale = [entry for entry in self._idle if now - entry[3] >= self.IDLE_SECONDS]
            self._idle = [entry for entry in self._idle if entry not in stale]
            self._expire_later()
        for entry in stale:
            kill(entry[2])

    def __len__(self) -> int:
        return len(self._idle)


def kill(handle: Any) -> None:
    """Stop ``handle``'s actor for good, if it is still there."""
    try:
        ray.kill(handle, no_restart=True)
    except Exception:  # noqa: BLE001 - already gone
        pass


WARM = WarmActors()
"""This process's kept session actors."""

WARM_ROLES = WarmActors()
"""This process's kept role pool actors, by role (they hold no CPU)."""
