"""Worker health on the ray engine: which session actors may take jobs while they die, restart and answer.

A worker whose actor died under a job, or restarted unseen while idle, is benched and prepared for
the run again; it takes jobs again as soon as that preparation answers. While Ray says it is
restarting it stays benched, so that no job spends an attempt on it (on a busy machine a restart
can take many seconds), for at most :data:`RESTART_WAIT`; one that Ray says is gone for good (or
its node) is benched for :data:`BENCH_SECONDS`, and the jobs sent to it afterwards find out.

This is bookkeeping only, over the run's :class:`~farm.engines.scheduler.Scheduler`: the driver
sends the preparations (``prepare``) and says how each answered (:meth:`WorkerHealth.answered`),
so the rules are tested without Ray.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from enum import StrEnum

from farm.engines.scheduler import Scheduler

__all__ = ["BENCH_SECONDS", "RESTART_WAIT", "Answer", "WorkerHealth"]

#: How long a worker that lost a conversation gets no new one while Ray says it is restarting
#: (it is asked until it answers: then it is back at once), at most (seconds).
RESTART_WAIT = 60.0

#: How long a worker whose actor Ray says is gone (or its node) gets no new one (seconds).
BENCH_SECONDS = 5.0


class Answer(StrEnum):
    """How a preparation answered when it did not answer with the worker's node."""

    RESTARTING = "restarting"
    """Ray says the actor is restarting: it cannot answer yet."""
    GONE = "gone"
    """Ray says the actor (or its node) is gone for good."""


class WorkerHealth:
    """The health of a run's workers; ``prepare(worker)`` sends a preparation and returns what
    :meth:`answered` is later told about (a Ray object ref)."""

    def __init__(self, scheduler: Scheduler, prepare: Callable[[str], Hashable], clock: Callable[[], float] = time.monotonic):
        self.scheduler = scheduler
        self._prepare = prepare
        self._clock = clock
        self.probes: dict[Hashable, str] = {}
        """Preparations in flight, to the worker each prepares."""
        self.restarting: dict[str, float] = {}
        """Worker → when it died, until it answers."""
        self.gone: set[str] = set()
        """Workers Ray says are gone for good."""
        self.node_of: dict[str, str] = {}
        """Where each worker runs, as it answered when prepared."""

    def watch(self, prepared: Mapping[str, Hashable]) -> None:
        """The workers' first preparations (jobs go to a new actor at once, queued behind them)."""
        self.probes.update({ref: worker for worker, ref in prepared.items()})

    def lost(self, worker: str) -> None:
        """``worker`` died under a job, or restarted unseen: benched until it is prepared again."""
        died = self.restarting.setdefault(worker, self._clock())
        self.scheduler.bench(worker, died + RESTART_WAIT)  # until it answers (see answered)
        if worker not in self.probes.values():
            self._probe(worker)

    def answered(self, probe: Hashable, node: str) -> None:
        """The preparation ``probe`` answered with the worker's ``node`` id, or an :class:`Answer`."""
        worker = self.probes.pop(probe)
        now = self._clock()
        if node is Answer.RESTARTING:
            if now - self.restarting.setdefault(worker, now) < RESTART_WAIT:
                self._probe(worker)  # it answers in a second or two, not at once
                return
            self.scheduler.rest(worker)  # restarting for a minute: let jobs find out
        elif node is Answer.GONE:
            self.scheduler.bench(worker, now + BENCH_SECONDS)
            self.gone.add(worker)
        else:
            self.node_of[worker] = node
            self.scheduler.rest(worker)
        self.restarting.pop(worker, None)

    def healthy(self, worker: str) -> bool:
        """Whether ``worker`` answered its last preparation and has not died since (it may be kept)."""
        return worker in self.node_of and worker not in self.restarting and worker not in self.gone and worker not in self.probes.values()

    def _probe(self, worker: str) -> None:
        self.probes[self._prepare(worker)] = worker
