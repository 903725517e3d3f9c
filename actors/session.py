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

from farm.agents.factory import TargetClients
from farm.agents.transport import HTTPClient, preload
from farm.config import FarmConfig
from farm.loader import LoadedCase
from farm.results import CaseResult
from farm.rolecache import target_cache
from farm.runner import RunSettings, run_case
from farm.scripts import ScriptResolver
from farm.services import FarmServices

if TYPE_CHECKING:
    from farm.actors.limiter import LimiterPlan

__all__ = ["SessionActor"]


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class SessionActor:
    def __init__(
        self,
        name: str,
        config: FarmConfig,
        settings: RunSettings,
        connector_override: str | None,
        concurrency: int,
        pools: dict[str, list[str]],
        limits: LimiterPlan | None = None,
        human: str | None = None,
    ):
        from farm.actors.limiter import limiter_factory
        from farm.actors.roles import PoolRoles

        self.name = name
        self.config = config
        self.settings = settings
        self.settings.worker = f"{name}@{ray.util.get_node_ip_address()}:{os.getpid()}"
        self.limiter_for = limiter_factory(limits)
        self.http = HTTPClient(concurrency)
        target = config.agents.get(settings.agent_id or "")
        if target is None or target.kind != "python":
            preload()  # an HTTP agent: import aiohttp before the first conversation, not in it
        self.slots = asyncio.Semaphore(concurrency)
        """Conversations run at once; calls beyond them wait here, ready to start."""
        self.stopping = False
        self.target = TargetClients(
            config,
            settings.agent_id,
            connector_override=connector_override,
            limiter_for=self.limiter_for,
            http=self.http,
            cache=target_cache(config, settings.agent_id, settings.cache),
        )
        self.human = ray.get_actor(human) if human else None
        self.services = FarmServices(
            config,
            PoolRoles(pools.get("simulator", []), pools.get("validator", [])),
            ScriptResolver(config.scripts_dir),
            human=self._ask_human if human is not None else None,
        )

    async def _ask_human(self, request: Any) -> str | None:
        return await self.human.ask.remote(request)

    async def run(self, loaded: LoadedCase, run_index: int, attempt: int) -> CaseResult | None:
        """Run one conversation; None when it waited for a slot and the run stopped meanwhile
        (see :meth:`stop`)."""
        waited = self.slots.locked()  # beyond this actor's share: queued, not yet dispatched
        async with self.slots:
            if waited and self.stopping:
                return None
            result = await run_case(loaded, self.target, self.services, self.settings)
        result.run_index, result.attempt = run_index, attempt
        return result

    async def stop(self) -> None:
        """Start none of the calls queued beyond this actor's share (``--fail-fast``): they return None."""
        self.stopping = True

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        await self.target.aclose()
        await self.http.aclose()

