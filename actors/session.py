"""Session actors: each conversation lives on one of them from its first turn to its last.

One Ray call per conversation (not per turn); an actor serves many
conversations at once on its event loop, spread over a few small HTTP
clients (one big httpx pool burns CPU, see RAY_NOTES).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import ray

from farm.agents.base import AgentClient
from farm.agents.factory import build_agent
from farm.config import FarmConfig
from farm.loader import LoadedCase
from farm.results import CaseResult
from farm.runner import RunSettings, run_case
from farm.scripts import ScriptResolver
from farm.services import FarmServices

__all__ = ["SessionActor", "CONVERSATIONS_PER_CLIENT"]

#: Conversations that share one HTTP client (and its connection pool).
CONVERSATIONS_PER_CLIENT = 32


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
        limits: dict[str, Any] | None = None,
        human: str | None = None,
    ):
        from actors.limiter import limiter_factory
        from actors.roles import PoolRoles

        self.name = name
        self.config = config
        self.settings = settings
        self.settings.worker = f"{name}@{ray.util.get_node_ip_address()}:{os.getpid()}"
        self.connector_override = connector_override
        self.limiter_for = limiter_factory(config, limits)
        self.n_clients = max(1, -(-concurrency // CONVERSATIONS_PER_CLIENT))
        self.clients: list[AgentClient] = []
        self._next = itertools.count()
        self.human = ray.get_actor(human) if human else None
        self.services = FarmServices(
            config,
            PoolRoles(pools.get("simulator", []), pools.get("validator", [])),
            ScriptResolver(config.scripts_dir),
            human=self._ask_human if human is not None else None,
        )

    def _client(self) -> AgentClient:
        if not self.clients:
            self.clients = [
                build_agent(self.config, self.settings.agent_id, connector_override=self.connector_override, limiter_for=self.limiter_for)
                for _ in range(self.n_clients)
            ]
        return self.clients[next(self._next) % len(self.clients)]

    async def _ask_human(self, request: Any) -> str | None:
        return await self.human.ask.remote(request)

    async def run(self, loaded: LoadedCase, run_index: int, attempt: int) -> CaseResult:
        result = await run_case(loaded, self._client(), self.services, self.settings)
        result.run_index, result.attempt = run_index, attempt
        return result

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()
