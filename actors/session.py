"""Session actors: each conversation lives on one of them from its first turn to its last.

One Ray call per conversation (not per turn); an actor serves many
conversations at once on its event loop, all sending through one HTTP
connection pool sized to them.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import ray

from farm.agents.transport import HTTPClient, preload
from farm.config import FarmConfig
from farm.conversation.settings import RunSettings
from farm.engines.worker import CaseWorker
from farm.results import CaseResult
from farm.suite.loader import LoadedCase

if TYPE_CHECKING:
    from farm.actors.limiter import LimiterPlan
    from farm.actors.roles import RolePools

__all__ = ["SessionActor"]


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class SessionActor:
    """Runs conversations of every agent it serves, ``concurrency`` at once; calls beyond them wait
    here ready to start, so that a slot that frees refills without a round trip through the driver."""

    def __init__(
        self,
        name: str,
        config: FarmConfig,
        agent_settings: dict[str, RunSettings],
        connector_override: str | None,
        concurrency: int,
        pools: RolePools,
        limits: LimiterPlan | None = None,
        human: str | None = None,
    ):
        from farm.actors.limiter import limiter_factory
        from farm.actors.roles import PoolRoles

        limiter_for = limiter_factory(limits)
        self.http = HTTPClient(concurrency)
        if any(config.agents.get(agent) is None or config.agents[agent].kind != "python" for agent in agent_settings):
            preload()  # an HTTP agent: import aiohttp before the first conversation, not in it
        self.slots = asyncio.Semaphore(concurrency)
        self.stopping = False
        self.human = ray.get_actor(human) if human else None
        self.worker = CaseWorker(
            config,
            agent_settings,
            worker=f"{name}@{ray.util.get_node_ip_address()}:{os.getpid()}",
            roles=PoolRoles(pools.simulators, pools.validators),
            http=self.http,
            limiter_for=limiter_for,
            connector_override=connector_override,
            ask_human=self._ask_human if human is not None else None,
        )

    async def _ask_human(self, request: Any) -> str | None:
        return await self.human.ask.remote(request)

    async def run(self, loaded: LoadedCase, run_index: int, agent: str) -> CaseResult | None:
        """Run one conversation; None when it waited for a slot and the run stopped meanwhile
        (see :meth:`stop`)."""
        waited = self.slots.locked()  # beyond this actor's share: queued, not yet dispatched
        async with self.slots:
            if waited and self.stopping:
                return None
            return await self.worker.run(loaded, run_index, agent)

    async def stop(self) -> None:
        """Start none of the calls queued beyond this actor's share (``--fail-fast``): they return None."""
        self.stopping = True

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        await self.worker.aclose()
        await self.http.aclose()
