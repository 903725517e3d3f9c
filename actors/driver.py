"""The driver: shards a suite across session actors and streams results back.

One Ray call per conversation; a bounded window of calls in flight; each new
case goes to the least-loaded actor (the bookkeeping is
:class:`~farm.engines.scheduler.Scheduler`, which the local engine shares). ``--parallel`` is shared out among the
actors as the number of conversations each may run at once; each also holds
as many calls again queued (:data:`QUEUED_SHARE`), so that a conversation
that ends is followed at once by the next, without waiting for the round
trip through the driver. Results are handed to ``on_result`` as
each case finishes, so memory stays flat however many cases run. A case whose
actor dies is run again elsewhere (``attempt`` 2, ...) and reported once.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray
from farm.actors.limiter import start_limiters
from farm.actors.placement import (
    conversations,
    plan_session_actors,
    start_session_actors,
    wait_until_placeable,
    warm_key,
)
from farm.actors.roles import PoolRoles, RolePools, RoleSetup, pool_names, start_pool, take_kept
from farm.actors.session import UNPREPARED, WARM, WARM_ROLES, SessionSetup
from ray.exceptions import ActorUnavailableError, RayActorError, RaySystemError, RayTaskError

from farm.config import AgentConfig
from farm.engines import EngineLost, Job, RunPlan, StopReason, Worker
from farm.engines.feed import ThreadFeed
from farm.results import CaseResult
from farm.roles.types import RoleRequest
from farm.suite.loader import LoadedCase

__all__ = ["run_plan"]

#: Calls queued on the actors beyond the conversations they run, as a share of
#: ``--parallel``: as many as run, so that when a whole wave of conversations ends
#: at once (agents with steady latency do that) every slot refills at once; with a
#: quarter, the refills waited on the driver and a run of 2000 conversations at
#: 500 ms took 9.2 s instead of 8.2 s. A queued call lost with its actor counts as
#: an attempt of its case, like a running one.
QUEUED_SHARE = 1.0

#: Below this ``--parallel`` nothing is queued: a few conversations gain nothing
#: from it, and a debugging run keeps one case per worker at a time.
QUEUE_FROM = 4

#: How long a worker that lost a conversation gets no new one while Ray says it is restarting
#: (it is asked until it answers: then it is back at once), at most (seconds).
RESTART_WAIT = 60.0

#: How long a worker whose actor Ray says is gone (or its node) gets no new one (seconds).
BENCH_SECONDS = 5.0

#: A cluster with fewer CPUs gets one actor per role pool (one asyncio actor answers hundreds of
#: role calls at once; a second only costs a process there), a larger one two.
POOL_PAIR_FROM_CPUS = 4


def run_plan(
    plan: RunPlan,
    on_result: Callable[[CaseResult], None],
    human: str | None = None,
) -> StopReason | None:
    """Run every case of ``plan`` (``runs`` times, on each agent) on the connected Ray cluster.

    ``on_result`` gets each result once, as it arrives. Once the scheduler stops (``--fail-fast``,
    ``--max-cost``) nothing more is dispatched and what is in flight finishes. An interrupt
    (``KeyboardInterrupt``) kills the actors, cancelling what is in flight. ``human``: the name of
    the actor that answers interactive questions.
    """
    # which session actors, with what resources, where, serving which agents (actors/placement.py)
    agents = [plan.config.agents.get(agent) or AgentConfig(id=agent) for agent in plan.agents]
    if any(agent.resources is not None for agent in agents):
        WARM.clear()  # its actors are planned on whole CPUs: the kept ones' slivers would leave none
    nodes = wait_until_placeable(agents, plan.config.farm.autoscaler_wait, say=lambda line: print(line, file=sys.stderr))
    specs = plan_session_actors(agents, plan.parallel, nodes, conversations(plan), plan.actors)
    queue_share = QUEUED_SHARE if plan.parallel >= QUEUE_FROM else 0.0
    scope = plan.settings.run_id or uuid.uuid4().hex[:8]

    limiter_handles, limits = start_limiters(plan.config, list(plan.config.connectors), scope)
    token = uuid.uuid4().hex  # this call's: a resumed run keeps its run id
    role_setup = RoleSetup(token, plan.config, limits, plan.settings.cache)
    # the role actors this process kept from its last run serve again; the others start when the
    # first case that needs one is about to run (a generator's: at its first call), so a run whose
    # cases need none, or a cached generation, starts none
    pool_size = 1 if sum(n.total.get("CPU", 0.0) for n in nodes) < POOL_PAIR_FROM_CPUS else max(1, min(2, len(specs)))
    roles = ("sim", "val", "gen") if plan.stream is not None else ("sim", "val")
    kept = {role: take_kept(role, pool_size, role_setup) for role in roles}
    members = {role: [*kept[role], *pool_names(f"farm-{role}-{scope}", pool_size)[len(kept[role]) :]] for role in roles}
    names = RolePools(members["sim"], members["val"], members.get("gen", []), setup=role_setup)
    pools: dict[str, dict[str, Any]] = {}
    pools_lock = threading.Lock()

    def start_roles(role: str) -> None:
        with pools_lock:  # the generation thread starts the generator pool
            if role not in pools:
                pools[role] = start_pool(members[role], role_setup, kept[role])

    def pools_for(cases: list[LoadedCase]) -> list[LoadedCase]:
        for role, index in (("sim", 0), ("val", 1)):
            if role not in pools and any(c.needs[index] for c in cases):
                start_roles(role)
        return cases

    setups = {
        spec.name: SessionSetup(token, spec.name, plan.config, plan.agent_settings, plan.connector_override, spec.concurrency, names, limits, human)
        for spec in specs
    }
    actors, prepared = start_session_actors(specs, queue_share, lambda spec: setups[spec.name])
    # a job of agent A goes only to an actor that serves A (one with declared resources serves its agent alone)
    workers = [Worker(spec.name, spec.slots(queue_share), frozenset(spec.agents)) for spec in specs]

    scheduler = plan.scheduler(workers)
    in_flight: dict[Any, tuple[str, Job]] = {}
    # a worker benched after a death is prepared for the run again until it answers (it restarted:
    # it takes jobs again at once) or is gone for good; while Ray says it is restarting it stays
    # benched, so that no job spends an attempt on it (on a busy machine a restart can take many seconds)
    probes: dict[Any, str] = {}
    restarting: dict[str, float] = {}  # worker -> when it died, until it answers
    gone: set[str] = set()  # workers Ray says are gone for good
    node_of: dict[str, str] = {}  # where each worker runs, as it answered when prepared

    def prepare_again(worker: str) -> None:
        """Bench ``worker`` (it died, or restarted unseen) until it is prepared for the run again."""
        died = restarting.setdefault(worker, time.monotonic())
        scheduler.bench(worker, died + RESTART_WAIT)  # until it answers (see probe)
        if worker not in probes.values():
            probes[actors[worker].prepare.remote(setups[worker])] = worker

    def probe(worker: str, ref: Any) -> None:
        try:
            node_of[worker] = ray.get(ref)
        except ActorUnavailableError:
            if time.monotonic() - restarting.setdefault(worker, time.monotonic()) < RESTART_WAIT:
                probes[actors[worker].prepare.remote(setups[worker])] = worker  # answered in a second or two, not at once
                return
            scheduler.rest(worker)  # restarting for a minute: let jobs find out
        except (RayActorError, RayTaskError):  # gone for good (or its node)
            scheduler.bench(worker, time.monotonic() + BENCH_SECONDS)
            gone.add(worker)
        else:
            scheduler.rest(worker)
        restarting.pop(worker, None)
    # jobs go to a new actor at once, queued behind its start and its preparation (a job that
    # Ray starts before the preparation comes back unprepared, and waits for it)
    probes.update({ref: worker for worker, ref in prepared.items()})
    told_to_stop = False
    for result in scheduler.add(pools_for(plan.cases)):
        on_result(result)

    generator: PoolRoles | None = None

    async def generate(request: RoleRequest) -> list[Any]:
        nonlocal generator
        if generator is None:
            start_roles("gen")
            generator = PoolRoles(RolePools(generators=names.generators, setup=role_setup))
        return await generator.generate(request)

    feed = ThreadFeed(plan.stream, lambda: generate, plan.on_generation) if plan.stream else None
    if feed is None:
        scheduler.close()

    def stopping() -> None:
        nonlocal told_to_stop
        if scheduler.stopped and not told_to_stop:
            told_to_stop = True
            for handle in actors.values():
                handle.stop.remote(token)  # the calls queued on the actors never start

    def submit() -> None:
        stopping()
        for worker, job in scheduler.assign(time.monotonic()):
            in_flight[actors[worker].run.remote(token, job.payload, job.run_index, job.agent)] = (worker, job)

    def take_arrivals(wait: float) -> None:
        if feed is None or not feed.open:
            return
        for batch in feed.take(wait):
            for result in scheduler.add(pools_for(batch)):
                on_result(result)
        if not feed.open:
            scheduler.close()

    ended = False
    try:
        while True:
            take_arrivals(0.0)
            submit()
            if scheduler.done:
                break
            waiting = [*in_flight, *probes]
            if not waiting:  # a generator's next batch, or the end of a bench
                if feed is not None and feed.open:
                    take_arrivals(0.1)
                else:
                    time.sleep(0.05)
                continue
            try:
                ready, _ = ray.wait(waiting, num_returns=1, timeout=0.05 if feed is not None and feed.open else 0.5)
            except (RaySystemError, ConnectionError) as exc:  # the local raylet or the GCS is gone
                raise EngineLost(f"the Ray cluster stopped answering ({type(exc).__name__})") from None
            if not ready:
                continue
            # take everything else that is ready too, without waiting
            more, _ = ray.wait([r for r in waiting if r not in ready], num_returns=len(waiting) - len(ready), timeout=0)
            arrived: list[CaseResult] = []
            for ref in ready + more:
                if ref in probes:
                    probe(probes.pop(ref), ref)
                    continue
                worker, job = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except RayActorError:
                    if not _cluster_alive():
                        raise EngineLost("the Ray node running this farm stopped") from None
                    arrived += scheduler.lost(job)
                    prepare_again(worker)
                    continue
                except RayTaskError as exc:  # a bug in the farm, not in the case
                    arrived += scheduler.crashed(job, repr(exc.cause))
                    continue
                if result is None:  # it was queued when the run stopped, and never began
                    scheduler.dropped(job)
                elif result == UNPREPARED:  # it restarted unseen (while idle): prepare it, the job waits
                    scheduler.returned(job)
                    prepare_again(worker)
                else:
                    arrived += scheduler.finished(job, result)
            # refill the freed slots before the slower work of writing and printing
            # the results, so that the actors never wait for the driver's console
            submit()
            for result in arrived:
                on_result(result)
        ended = True
    finally:
        if feed is not None:
            feed.close()
        for spec in specs:
            handle = actors[spec.name]
            healthy = spec.name in node_of and spec.name not in restarting and spec.name not in gone and spec.name not in probes.values()
            if ended and healthy and not spec.declared:
                handle.retire.remote(token)  # kept for this process's next run on this cluster
                WARM.keep(warm_key(spec, node_of[spec.name]), handle)
            else:
                ray.kill(handle, no_restart=True)
        with pools_lock:
            for role in roles:
                for name, handle in (pools.get(role) or kept[role]).items():
                    if ended:
                        handle.retire.remote(token)  # kept for this process's next run on this cluster
                        WARM_ROLES.keep(("role", role), handle, name)
                    else:
                        ray.kill(handle, no_restart=True)
        for handle in limiter_handles.values():
            ray.kill(handle, no_restart=True)
    return scheduler.stop_reason if scheduler.stop_reason != StopReason.REQUESTED else None


def _cluster_alive() -> bool:
    """Whether a node that can run session actors is still alive (asked only after a loss)."""
    try:
        return any(node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0 for node in ray.nodes())
    except Exception:  # noqa: BLE001 - no answer from the GCS is no cluster
        return False
