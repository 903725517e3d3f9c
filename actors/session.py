"""Session actors: each conversation lives on one of them from its first turn to its last.

One Ray call per conversation (not per turn); an actor serves many
conversations at once on its event loop, all sending through one HTTP
connection pool sized to them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import ray

from farm.agents.base import AgentClient, AgentError
from farm.errors import FarmError
from farm.agents.factory import build_agent
from farm.agents.transport import HTTPClient, preload
from farm.config import FarmConfig
from farm.loader import LoadedCase
from farm.results import CaseResult
from farm.runner import RunSettings, run_case
from farm.scripts import ScriptResolver
from farm.services import FarmServices

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
        self.http = HTTPClient(concurrency)
        target = config.agents.get(settings.agent_id or "")
        if target is None or target.kind != "python":
            preload()  # an HTTP agent: import aiohttp before the first conversation, not in it
        self.slots = asyncio.Semaphore(concurrency)
        """Conversations run at once; calls beyond them wait here, ready to start."""
        self.stopping = False
        self.client: AgentClient | None = None
        self.by_connector: dict[str, AgentClient] = {}
        self.human = ray.get_actor(human) if human else None
        self.services = FarmServices(
            config,
            PoolRoles(pools.get("simulator", []), pools.get("validator", [])),
            ScriptResolver(config.scripts_dir),
            human=self._ask_human if human is not None else None,
        )

    def _client(self) -> AgentClient:
        if self.client is None:
            self.client = build_agent(self.config, self.settings.agent_id, connector_override=self.connector_override, limiter_for=self.limiter_for, http=self.http)
        return _ConnectorRouter(self, self.client)

    def client_on(self, connector: str) -> AgentClient:
        """The target agent on another connector (a case's ``options.connector``), built once."""
        if connector not in self.by_connector:
            try:
                self.by_connector[connector] = build_agent(self.config, self.settings.agent_id, connector_override=connector, limiter_for=self.limiter_for, http=self.http)
            except FarmError as exc:
                raise AgentError(f"options.connector: {exc}") from None
        return self.by_connector[connector]

    async def _ask_human(self, request: Any) -> str | None:
        return await self.human.ask.remote(request)

    async def run(self, loaded: LoadedCase, run_index: int, attempt: int) -> CaseResult | None:
        """Run one conversation; None when it waited for a slot and the run stopped meanwhile
        (see :meth:`stop`)."""
        waited = self.slots.locked()  # beyond this actor's share: queued, not yet dispatched
        async with self.slots:
            if waited and self.stopping:
                return None
            result = await run_case(loaded, self._client(), self.services, self.settings)
        result.run_index, result.attempt = run_index, attempt
        return result

    async def stop(self) -> None:
        """Start none of the calls queued beyond this actor's share (``--fail-fast``): they return None."""
        self.stopping = True

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        for client in (self.client, *self.by_connector.values()):
            if client is not None:
                await client.aclose()
        await self.http.aclose()


class _ConnectorRouter:
    """Sends on the actor's usual client, or on the connector a case's options name.

    A case's ``options.connector`` (or a turn's) is more specific than ``-c``, so it wins.
    """

    def __init__(self, actor: SessionActor, default: AgentClient):
        self.actor = actor
        self.default = default

    async def send(self, messages: list[Any], options: dict[str, Any]) -> Any:
        connector = options.get("connector")
        client = self.default if not connector else self.actor.client_on(connector)
        return await client.send(messages, options)

    async def aclose(self) -> None:
        pass
