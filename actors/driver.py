"""The driver: shards a suite across session actors and streams results back.

One Ray call per conversation; a bounded window of calls in flight; each new
case goes to the least-loaded actor (the bookkeeping is
:class:`~actors.dispatch.Dispatcher`). ``--parallel`` is shared out among the
actors as the number of conversations each may run at once; each also holds
as many calls again queued (:data:`QUEUED_SHARE`), so that a conversation
that ends is followed at once by the next, without waiting for the round
trip through the driver. Results are handed to ``on_result`` as
each case finishes, so memory stays flat however many cases run. A case whose
actor dies is run again elsewhere (``attempt`` 2, ...) and reported once.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray
from farm.actors.dispatch import Dispatcher
from farm.actors.limiter import start_limiters
from farm.actors.roles import start_pool
from farm.actors.session import SessionActor
from ray.exceptions import RayActorError, RaySystemError, RayTaskError

from farm.engines import EngineLost, Job, RunPlan
from farm.loader import LoadedCase
from farm.results import CaseResult
from farm.runner import RunSettings, error_result

__all__ = ["actor_count", "run_plan"]

#: Conversations one session actor runs at once, at most.
MAX_PER_ACTOR = 512

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

#: How long an actor that just lost a conversation gets no new one: long enough for a
#: restart, or for Ray to declare a lost node dead (its actors answer "unavailable" until then).
BENCH_SECONDS = 5.0


def actor_count(plan: RunPlan, cpus: float) -> int:
    """Session actors for the plan: at least two where there are two CPUs, so a dying actor
    never stalls the run; more only for high parallelism (each actor is a process of ~110 MiB)."""
    if plan.actors:
        return plan.actors
    cores = max(1, int(cpus))
    return max(min(2, cores), min(cores, math.ceil(plan.parallel / 64), 16))


def run_plan(
    plan: RunPlan,
    on_result: Callable[[CaseResult], None],
    should_stop: Callable[[], bool] = lambda: False,
    human: str | None = None,
) -> None:
    """Run every case of ``plan`` (``runs`` times) on the connected Ray cluster.

    ``on_result`` gets each result once, as it arrives. ``should_stop`` is polled
    between arrivals: once it is true (or, with ``fail_fast``, once a case has
    failed) nothing more is dispatched and what is in flight finishes. An
    interrupt (``KeyboardInterrupt``) kills the actors, cancelling what is in flight.
    ``human``: the name of the actor that answers interactive questions.
    """
    settings = plan.settings
    cpus = float(ray.cluster_resources().get("CPU", 1))
    n_actors = min(actor_count(plan, cpus), plan.parallel)
    shares = [min(MAX_PER_ACTOR, plan.parallel // n_actors + (i < plan.parallel % n_actors)) for i in range(n_actors)]
    queued = int(plan.parallel * QUEUED_SHARE) if plan.parallel >= QUEUE_FROM else 0
    scope = settings.run_id or uuid.uuid4().hex[:8]

    limiter_handles, limits = start_limiters(plan.config, list(plan.config.connectors), scope)
    need_sim, need_val = plan.needs_roles()
    pool_size = max(1, min(2, n_actors))
    pools = {
        "simulator": start_pool(f"farm-sim-{scope}", pool_size, plan.config, limits, cache=settings.cache) if need_sim else {},
        "validator": start_pool(f"farm-val-{scope}", pool_size, plan.config, limits, cache=settings.cache) if need_val else {},
    }
    pool_names = {role: list(handles) for role, handles in pools.items()}
    actors: dict[str, Any] = {}
    for i, share in enumerate(shares):
        name = f"session-{i}"
        actors[name] = SessionActor.options(
            max_concurrency=share + queued + 4, scheduling_strategy="SPREAD"
        ).remote(name, plan.config, settings, plan.connector_override, share, pool_names, limits, human)

    dispatcher = Dispatcher(list(actors), window=sum(shares) + queued, max_attempts=plan.max_attempts)
    in_flight: dict[Any, Job] = {}
    failed_seen = False

    def report(result: CaseResult, job: Job) -> None:
        nonlocal failed_seen
        if dispatcher.finished(job):
            on_result(job.final(result))
            if not result.status.ok:
                failed_seen = True

    # cases that did not load are reported at once; they never reach an actor
    runnable: list[Job] = []
    for job in plan.jobs():
        loaded: LoadedCase = job.payload
        if loaded.ok:
            runnable.append(job)
        else:
            result = error_result(loaded, settings, loaded.error or "the case did not load")
            result.run_index = job.key[1]
            report(result, job)
    dispatcher.add(runnable)

    def stopping() -> bool:
        if not dispatcher.stopped and (should_stop() or (plan.fail_fast and failed_seen)):
            dispatcher.stop()
            for handle in actors.values():
                handle.stop.remote()  # the calls queued on the actors never start
        return dispatcher.stopped

    def submit() -> None:
        for worker, job in dispatcher.assign(time.monotonic()):
            in_flight[actors[worker].run.remote(job.payload, job.key[1], job.attempt)] = job

    try:
        while True:
            if not stopping():
                submit()
            if not in_flight:
                break
            try:
                ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.5)
            except (RaySystemError, ConnectionError) as exc:  # the local raylet or the GCS is gone
                raise EngineLost(f"the Ray cluster stopped answering ({type(exc).__name__})") from None
            if not ready:
                continue
            # take everything else that is ready too, without waiting
            more, _ = ray.wait([r for r in in_flight if r not in ready], num_returns=len(in_flight) - len(ready), timeout=0)
            arrived: list[tuple[CaseResult, Job]] = []
            for ref in ready + more:
                job = in_flight.pop(ref)
                try:
                    result = ray.get(ref)
                except RayActorError as exc:
                    if not _cluster_alive():
                        raise EngineLost("the Ray node running this farm stopped") from None
                    worker = dispatcher.running.get(job.key, (None,))[0]
                    if worker is not None:
                        dispatcher.bench(worker, time.monotonic() + BENCH_SECONDS)
                    _lost(dispatcher, job, exc, report, settings)
                    continue
                except RayTaskError as exc:  # a bug in the farm, not in the case
                    result = error_result(job.payload, settings, f"internal error while running the case: {exc.cause!r}")
                    result.run_index, result.attempt = job.key[1], job.attempt
                dispatcher.release(job)
                if result is None:  # it was queued when the run stopped, and never began
                    continue
                if plan.should_retry(job, result) and not stopping() and dispatcher.again(job.again(result)):
                    continue  # --retries: the next attempt replaces this one, which is not reported
                arrived.append((result, job))
            # refill the freed slots before the slower work of writing and printing
            # the results, so that the actors never wait for the driver's console
            failed_seen = failed_seen or any(not r.status.ok for r, _ in arrived)
            if not stopping():
                submit()
            for result, job in arrived:
                report(result, job)
    finally:
        for handle in actors.values():
            ray.kill(handle, no_restart=True)
        for pool in pools.values():
            for handle in pool.values():
                ray.kill(handle, no_restart=True)
        for handle in limiter_handles.values():
            ray.kill(handle, no_restart=True)


def _cluster_alive() -> bool:
    """Whether a node that can run session actors is still alive (asked only after a loss)."""
    try:
        return any(node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0 for node in ray.nodes())
    except Exception:  # noqa: BLE001 - no answer from the GCS is no cluster
        return False


def _lost(dispatcher: Dispatcher, job: Job, exc: Exception, report: Callable[[CaseResult, Job], None], settings: RunSettings) -> None:
    retry = dispatcher.lost(job)
    if retry is None and not dispatcher.stopped:
        result = error_result(
            job.payload,
            settings,
            f"the worker running this case died {job.attempt} time(s); gave up after {job.attempt} attempts",
        )
        result.run_index, result.attempt = job.key[1], job.attempt
        report(result, job)
