"""The driver: shards a suite across session actors and streams results back.

A pump like the local engine's: the run's actors are started and released by
:mod:`farm.actors.fleet`; which case goes where is the bookkeeping of
:class:`~farm.engines.scheduler.Scheduler`, which the local engine shares, and which actor may
take cases while actors die and restart is :class:`~farm.engines.health.WorkerHealth`'s.
One Ray call per conversation; a bounded window of calls in flight; each new
case goes to the least-loaded actor. ``--parallel`` is shared out among the
actors as the number of conversations each may run at once; each also holds
as many calls again queued (:data:`QUEUED_SHARE`), so that a conversation
that ends is followed at once by the next, without waiting for the round
trip through the driver. Results are handed to ``on_result`` as
each case finishes, so memory stays flat however many cases run. A case whose
actor dies is run again elsewhere (``attempt`` 2, ...) and reported once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray
from farm.actors.fleet import RunActors, start_actors
from farm.actors.session import UNPREPARED
from ray.exceptions import ActorUnavailableError, RayActorError, RaySystemError, RayTaskError

from farm.engines import EngineLost, Job, RunPlan, Scheduler, StopReason
from farm.engines.feed import ThreadFeed
from farm.engines.finished import Finished
from farm.engines.health import Answer, WorkerHealth
from farm.interrupts import redeliver
from farm.results import CaseResult

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


def run_plan(plan: RunPlan, on_result: Callable[[CaseResult], None], human: str | None = None, traces: str | None = None) -> StopReason | None:
    """Run every case of ``plan`` (``runs`` times, on each agent) on the connected Ray cluster.

    ``on_result`` gets each result once, as it arrives. Once the scheduler stops (``--fail-fast``,
    ``--max-cost``) nothing more is dispatched and what is in flight finishes. An interrupt
    (``KeyboardInterrupt``) kills the actors, cancelling what is in flight. ``human``: the name of
    the actor that answers interactive questions; ``traces``: the run's trace desk (:mod:`farm.actors.traces`).
    """
    actors = start_actors(plan, QUEUED_SHARE if plan.parallel >= QUEUE_FROM else 0.0, human, traces)
    scheduler = plan.scheduler(actors.workers)
    health = WorkerHealth(scheduler, actors.prepare)
    health.watch(actors.prepared)
    ended = False
    try:
        _Pump(plan, actors, scheduler, health, on_result).run()
        ended = True
    finally:
        actors.release(keep=ended, health=health)
    return scheduler.stop_reason if scheduler.stop_reason != StopReason.REQUESTED else None


class _Pump:
    """The run's loop: send jobs to free slots, take what is ready, settle it, and again until done."""

    def __init__(self, plan: RunPlan, actors: RunActors, scheduler: Scheduler, health: WorkerHealth, on_result: Callable[[CaseResult], None]):
        self.actors, self.scheduler, self.health = actors, scheduler, health
        self.in_flight: dict[Any, tuple[str, Job]] = {}
        self.finished = Finished(on_result, scheduler.add(actors.roles.for_cases(plan.cases)))
        self.feed = ThreadFeed(plan.feed, lambda: actors.roles.generate, plan.on_progress)  # a static suite's ends at once
        self.take_arrivals(0.0)

    @property
    def generating(self) -> bool:
        return self.feed.open

    def run(self) -> None:
        try:
            while True:
                redeliver()  # an interrupt Python swallowed where it landed
                self.take_arrivals(0.0)
                # refill the freed slots before the slower work of writing and printing
                # the results, so that the actors never wait for the driver's console
                self.submit()
                self.finished.record_all()
                if self.scheduler.done:
                    return
                waiting = [*self.in_flight, *self.health.probes]
                if not waiting:  # a generator's next batch, or the end of a bench
                    if self.generating:
                        self.take_arrivals(0.1)
                    else:
                        time.sleep(0.05)
                    continue
                self.finished.take(self.settle, *self.ready(waiting))
        except KeyboardInterrupt:  # interrupted: the cases that ended are kept, not run again
            # a case whose result is back (or came back meanwhile) ran: it is written before the actors go
            if self.in_flight:
                self.finished.take(self.settle, *ray.wait(list(self.in_flight), num_returns=len(self.in_flight), timeout=0)[0])
            self.finished.record_all()
            raise
        finally:
            self.feed.close()

    def submit(self) -> None:
        if self.scheduler.stopped:
            self.actors.stop()
        for worker, job in self.scheduler.assign(time.monotonic()):
            self.in_flight[self.actors.run(worker, job)] = (worker, job)

    def take_arrivals(self, wait: float) -> None:
        if not self.feed.open:
            return
        for batch in self.feed.take(wait):
            self.finished.add(self.scheduler.add(self.actors.roles.for_cases(batch)))
        if not self.feed.open:
            self.scheduler.close()

    def ready(self, waiting: list[Any]) -> list[Any]:
        """The calls of ``waiting`` that are done: at least one, or none after a short wait."""
        try:
            ready, _ = ray.wait(waiting, num_returns=1, timeout=0.05 if self.generating else 0.5)
        except (RaySystemError, ConnectionError) as exc:  # the local raylet or the GCS is gone
            raise EngineLost(f"the Ray cluster stopped answering ({type(exc).__name__})") from None
        if not ready:
            return []
        # take everything else that is ready too, without waiting
        more, _ = ray.wait([r for r in waiting if r not in ready], num_returns=len(waiting) - len(ready), timeout=0)
        return ready + more

    def settle(self, ref: Any) -> list[CaseResult]:
        """What the call ``ref`` came back with (a preparation's answer, or a job's end): the results to report."""
        if ref in self.health.probes:
            self.health.answered(ref, _node_of(ref))
            return []
        worker, job = self.in_flight.pop(ref)
        try:
            result = ray.get(ref)
        except RayActorError:
            if not _cluster_alive():
                raise EngineLost("the Ray node running this farm stopped") from None
            lost = self.scheduler.lost(job)
            self.health.lost(worker)
            return lost
        except RayTaskError as exc:  # a bug in the farm, not in the case
            return self.scheduler.crashed(job, repr(exc.cause))
        if result is None:  # it was queued when the run stopped, and never began
            self.scheduler.dropped(job)
        elif result == UNPREPARED:  # it restarted unseen (while idle): prepare it, the job waits
            self.scheduler.returned(job)
            self.health.lost(worker)
        else:
            return self.scheduler.finished(job, result)
        return []


def _node_of(probe: Any) -> str:
    """The node a preparation answered with, or how Ray says its actor is (:class:`Answer`)."""
    try:
        return str(ray.get(probe))
    except ActorUnavailableError:
        return Answer.RESTARTING
    except (RayActorError, RayTaskError):  # gone for good (or its node)
        return Answer.GONE


def _cluster_alive() -> bool:
    """Whether a node that can run session actors is still alive (asked only after a loss)."""
    try:
        return any(node.get("Alive") and node.get("Resources", {}).get("CPU", 0) > 0 for node in ray.nodes())
    except Exception:  # noqa: BLE001 - no answer from the GCS is no cluster
        return False
