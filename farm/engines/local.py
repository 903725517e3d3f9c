"""The local engine: every conversation of a run in this process, on one asyncio loop.

It starts nothing, so a small run's first case starts at once. The same parts
as on Ray, in one process: the runner from :mod:`farm.runner`; each limited
connector's :class:`~farm.ratelimit.LimiterCore` with a
:class:`~farm.ratelimit.PermitClient` in front of it; simulator and validator
calls on budgets and HTTP clients of their own; ``--parallel`` conversations
in flight at most, started in suite order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from farm.agents.factory import TargetClients
from farm.agents.transport import HTTPClient
from farm.aio import run_sync
from farm.engines import Job, RunPlan, Terminal
from farm.ratelimit import local_limiters
from farm.results import CaseResult
from farm.rolecache import RoleCache, target_cache
from farm.roletypes import HumanRequest
from farm.runner import error_result, run_case
from farm.scripts import ScriptResolver
from farm.services import FarmServices, LocalRoles
from farm.terminal import ask_on_terminal

__all__ = ["LocalEngine"]


class LocalEngine:
    name = "local"
    starting = None

    def start(self, run_dir: Path | None = None) -> dict[str, Any]:
        return {}

    def run(self, plan: RunPlan, on_result: Callable[[CaseResult], None], should_stop: Callable[[], bool] = lambda: False) -> None:
        run_sync(_run(plan, on_result, should_stop))

    def close(self) -> None:
        pass


class _TerminalAsker:
    """Interactive mode: one question at a time to the person at ``terminal``, off the loop."""

    def __init__(self, terminal: Terminal):
        self.terminal = terminal
        self.lock = asyncio.Lock()

    async def __call__(self, request: HumanRequest) -> str | None:
        async with self.lock:
            return await asyncio.to_thread(ask_on_terminal, request, self.terminal.stdin, self.terminal.write)


async def _run(plan: RunPlan, on_result: Callable[[CaseResult], None], should_stop: Callable[[], bool]) -> None:
    settings = dataclasses.replace(plan.settings, worker=f"local@{socket.gethostname()}:{os.getpid()}")
    limiter_for = local_limiters(plan.config)
    http = HTTPClient(plan.parallel)
    replay = plan.replay
    # a rescore calls no agent: no client for it is opened
    target = None if replay else TargetClients(
        plan.config,
        settings.agent_id,
        connector_override=plan.connector_override,
        limiter_for=limiter_for,
        http=http,
        cache=target_cache(plan.config, settings.agent_id, settings.cache),
    )
    roles = LocalRoles(plan.config, limiter_for=limiter_for, cache=RoleCache.for_config(plan.config) if settings.cache else None)
    services = FarmServices(
        plan.config,
        roles,
        ScriptResolver(plan.config.scripts_dir),
        human=_TerminalAsker(plan.terminal) if plan.terminal is not None else None,
    )

    async def one(job: Job) -> CaseResult:
        while True:
            try:
                if replay is not None:
                    result = await replay.run(job.payload, job.key[1], services, settings)
                else:
                    assert target is not None
                    result = await run_case(job.payload, target, services, settings)
            except Exception as exc:  # noqa: BLE001 - a bug in the farm, not in the case
                result = error_result(job.payload, settings, f"internal error while running the case: {exc!r}")
            if stopped or replay is not None or not plan.should_retry(job, result):
                return job.final(result)
            job = job.again(result)

    jobs = plan.jobs()
    in_flight: set[asyncio.Task[CaseResult]] = set()
    stopped = False
    try:
        while True:
            while not stopped and len(in_flight) < plan.parallel:
                job = next(jobs, None)
                if job is None:
                    break
                if not job.payload.ok:  # a case that did not load: its error at once
                    result = error_result(job.payload, settings, job.payload.error or "the case did not load")
                    result.run_index = job.key[1]
                    on_result(result)
                    stopped = stopped or plan.fail_fast
                    continue
                in_flight.add(asyncio.ensure_future(one(job)))
            if not in_flight:
                break
            done, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                result = task.result()
                on_result(result)
                stopped = stopped or (plan.fail_fast and not result.status.ok)
            stopped = stopped or should_stop()
    finally:
        for task in in_flight:
            task.cancel()
        await asyncio.gather(*in_flight, return_exceptions=True)
        if target is not None:
            await target.aclose()
        await roles.aclose()
        await http.aclose()
