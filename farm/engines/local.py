"""The local engine: every conversation of a run in this process, on one asyncio loop.

It starts nothing, so a small run's first case starts at once. The same parts
as on Ray, in one process: the runner from :mod:`farm.conversation.runner`; each limited
connector's :class:`~farm.ratelimit.LimiterCore` with a
:class:`~farm.ratelimit.PermitClient` in front of it; simulator and validator
calls on budgets and HTTP clients of their own; ``--parallel`` conversations
in flight at most, started in suite order.

One process means one interpreter: a sync ``python`` agent runs on a thread per
conversation (:mod:`farm.agents.python`), so one that waits never holds up the
others, but one that computes in Python runs a reply at a time (the GIL). Such
an agent declares ``resources`` and runs on the ray engine, one core per slot.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from farm.agents.transport import HTTPClient
from farm.aio import run_sync
from farm.engines import Job, RunPlan, StopReason, Worker
from farm.engines.feed import Arrival, pump
from farm.engines.finished import Finished
from farm.engines.worker import CaseWorker
from farm.interrupts import redeliver
from farm.ratelimit import local_limiters
from farm.results import CaseResult
from farm.roles.cache import RoleCache
from farm.roles.services import LocalRoles
from farm.terminal import TerminalAsker

if TYPE_CHECKING:
    from farm.traces.receiver import SpanSink

__all__ = ["LocalEngine"]


class LocalEngine:
    name = "local"
    starting = None

    def start(self, run_dir: Path | None = None) -> dict[str, Any]:
        return {}

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None]) -> StopReason | None:
        return run_sync(_run(plan, on_result), idle=plan.when_idle)

    def close(self) -> None:
        pass

    def span_sink(self, run_id: str) -> SpanSink:
        """The process's collector: the sessions are tasks of this process."""
        from farm.traces.capture import collector

        return collector()[0]


def _case_worker(plan: RunPlan, roles: LocalRoles, http: HTTPClient, limiter_for: Callable[[str], Any]) -> CaseWorker:
    return CaseWorker(
        plan.config,
        plan.agent_settings,
        worker=f"local@{socket.gethostname()}:{os.getpid()}",
        roles=roles,
        http=http,
        limiter_for=limiter_for,
        connector_override=plan.connector_override,
        ask_human=TerminalAsker(plan.terminal.stdin, plan.terminal.write) if plan.terminal is not None else None,
        replay=plan.replay,
    )


async def _run(plan: RunPlan, on_result: Callable[[CaseResult], None]) -> StopReason | None:
    limiter_for = local_limiters(plan.config)
    http = HTTPClient(plan.parallel)
    roles = LocalRoles(plan.config, limiter_for=limiter_for, cache=RoleCache.for_config(plan.config) if plan.settings.cache else None)
    worker = _case_worker(plan, roles, http, limiter_for)
    scheduler = plan.scheduler([Worker("local", plan.parallel)])
    finished = Finished(on_result, scheduler.add(plan.cases))  # recorded once the cases that took the free slots are sent
    arrived: list[Arrival] = []
    wake = asyncio.Event()

    def put(item: Arrival) -> None:
        arrived.append(item)
        wake.set()

    feed = asyncio.ensure_future(pump(plan.feed, roles.generate, put, plan.on_progress))  # a static suite's ends at once
    running: dict[asyncio.Future[CaseResult], Job] = {}
    failed: list[BaseException] = []
    closing = False  # the run is ending (done, failed or interrupted): no case starts any more

    def start_next() -> None:
        for _, job in scheduler.assign():
            task = asyncio.ensure_future(worker.run(job.payload, job.run_index, job.agent))
            running[task] = job
            task.add_done_callback(ended)

    def settle(task: asyncio.Future[CaseResult]) -> list[CaseResult]:  # its case ended on its own: it leaves `running`
        job = running.pop(task)
        return scheduler.crashed(job, repr(exc)) if (exc := task.exception()) is not None else scheduler.finished(job, task.result())

    def ended(task: asyncio.Future[CaseResult]) -> None:
        """A case ended: its slot takes the next case at once, before any result is written,
        so that a slot waits for no other case's bookkeeping (nor a burst of replies for theirs)."""
        if closing or task not in running or not _ended_itself(task):
            return
        try:
            finished.take(settle, task)
            start_next()
        except Exception as error:  # noqa: BLE001 - raised again where the run is pumped
            failed.append(error)
        wake.set()

    try:
        start_next()
        while not (scheduler.done and not finished):
            if not (finished or arrived or failed):
                await wake.wait()
                wake.clear()
                await asyncio.sleep(0)  # the cases just started send their requests first
            redeliver()  # an interrupt Python swallowed where it landed
            if failed:
                raise failed[0]
            for item in arrived:
                if item is None:
                    scheduler.close()
                elif isinstance(item, Exception):
                    raise item
                else:
                    finished.add(scheduler.add(item))
            arrived.clear()
            while finished:  # a reply that came meanwhile is read first: it holds up its slot, a result nothing
                finished.record_one()
                await asyncio.sleep(0)
            start_next()
    except (KeyboardInterrupt, asyncio.CancelledError):  # interrupted: the cases that ended are kept, not run again,
        finished.take(settle, *[t for t in running if t.done() and _ended_itself(t)])  # those whose `ended` had not run too
        finished.record_all()
        raise
    finally:
        closing = True
        pending: list[asyncio.Future[Any]] = [*running, feed]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await worker.aclose()
        await roles.aclose()
        await http.aclose()
    return scheduler.stop_reason if scheduler.stop_reason != StopReason.REQUESTED else None


def _ended_itself(task: asyncio.Future[CaseResult]) -> bool:
    """Whether the case of ``task`` came to its own end: not cancelled by the ending run, nor
    stopped by an interrupt that came in its step (a ``KeyboardInterrupt`` is no case's error)."""
    return not task.cancelled() and isinstance(task.exception(), Exception | None)
