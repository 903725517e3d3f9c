"""The dispatcher's bookkeeping: which job is on which actor, what to re-queue.

A pure state machine (no Ray), so it is unit-tested without a cluster; the
driver only pumps events through it:

    assign(now)     -> (worker, job) pairs to start, least-loaded worker first,
                       never more than ``window`` jobs in flight
    bench(w, until) -> a worker whose job was lost gets no new job for a while
    release(job)    -> the job's result is in hand: its slot is free for the next one
    finished(job)   -> the job's result arrived: it is reported exactly once
    lost(job)       -> its worker died: re-queued with attempt + 1, or given up
    again(job)      -> its agent failed and ``--retries`` allows more: the next attempt, re-queued
    stop()          -> dispatch no more (``--fail-fast``, Ctrl-C)
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from farm.engines import Job

__all__ = ["Dispatcher", "Job"]


@dataclass
class Dispatcher:
    workers: list[str]
    window: int
    max_attempts: int = 3
    pending: deque[Job] = field(default_factory=deque)
    running: dict[Hashable, tuple[str, Job]] = field(default_factory=dict)
    load: dict[str, int] = field(default_factory=dict)
    done: set[Hashable] = field(default_factory=set)
    stopped: bool = False
    benched: dict[str, float] = field(default_factory=dict)
    """Workers that just lost a job, and until when they get no new one."""

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError("window must be at least 1")
        for worker in self.workers:
            self.load.setdefault(worker, 0)

    def add(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            if job.key not in self.done:
                self.pending.append(job)

    def bench(self, worker: str, until: float) -> None:
        """Give ``worker`` no new job before ``until`` (it died and may still be restarting,
        or its node is going away): its now-low load would otherwise draw every retry to it."""
        self.benched[worker] = until

    def assign(self, now: float = 0.0) -> list[tuple[str, Job]]:
        """Jobs to start now, each on the least-loaded worker that is not benched at ``now``
        (when every worker is benched, all of them are used)."""
        if self.stopped or not self.workers:
            return []
        out = []
        usable = [w for w in self.workers if self.benched.get(w, 0.0) <= now] or self.workers
        heap = [(self.load[w], i, w) for i, w in enumerate(usable)]
        heapq.heapify(heap)
        while self.pending and len(self.running) < self.window:
            load, i, worker = heapq.heappop(heap)
            job = self.pending.popleft()
            self.running[job.key] = (worker, job)
            self.load[worker] = load + 1
            heapq.heappush(heap, (load + 1, i, worker))
            out.append((worker, job))
        return out

    def release(self, job: Job) -> str | None:
        """``job`` no longer holds a slot (its result is in hand, to be reported with
        :meth:`finished`); returns the worker it ran on. Safe to call twice."""
        entry = self.running.pop(job.key, None)
        if entry is None:
            return None
        worker = entry[0]
        if worker in self.load:
            self.load[worker] -= 1
        return worker

    def finished(self, job: Job) -> bool:
        """Record a result; False when this job was already reported (drop the duplicate)."""
        self.release(job)
        if job.key in self.done:
            return False
        self.done.add(job.key)
        return True

    def lost(self, job: Job) -> Job | None:
        """The worker running ``job`` died. Returns the re-queued job, or None when
        the job has used up its attempts (the caller reports it as an error)."""
        self.release(job)
        if job.key in self.done:
            return None
        if job.attempt - len(job.retried) >= self.max_attempts:  # deaths only: --retries counts apart
            return None
        retry = Job(job.key, job.payload, job.attempt + 1, list(job.retried))
        if not self.stopped:
            self.pending.appendleft(retry)
        return retry

    def again(self, job: Job) -> bool:
        """Queue ``job``, the next attempt of a case whose agent failed (``Job.again``), first in
        line; False when the run is stopping (the caller reports the last attempt instead)."""
        self.release(job)
        if self.stopped or job.key in self.done:
            return False
        self.pending.appendleft(job)
        return True

    def stop(self) -> list[Job]:
        """Dispatch nothing more; returns the jobs that will never start."""
        self.stopped = True
        dropped = list(self.pending)
        self.pending.clear()
        return dropped

    @property
    def idle(self) -> bool:
        return not self.running and (self.stopped or not self.pending)
