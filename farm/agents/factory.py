"""From ``farm.toml`` to a client: :func:`build_agent` picks the class by the agent's ``kind``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from farm.agents.base import AgentClient, AgentError
from farm.agents.http import HTTPAgent
from farm.agents.openai import OpenAIAgent
from farm.agents.permits import Limiter, NoLimit
from farm.agents.python import PythonAgent
from farm.agents.transport import HTTPClient
from farm.config import Connector, FarmConfig
from farm.errors import FarmError, UsageError

if TYPE_CHECKING:
    from farm.roles.cache import RoleCache

__all__ = ["TargetClients", "build_agent"]


def build_agent(
    config: FarmConfig,
    agent_id: str,
    *,
    connector_override: str | None = None,
    limiter_for: Callable[[str], Limiter] | None = None,
    http: HTTPClient | None = None,
) -> AgentClient:
    """The client for agent ``agent_id``.

    - ``openai``: an :class:`OpenAIAgent` on its connector (required);
    - ``http``: an :class:`HTTPAgent` on its ``url`` and/or connector;
    - ``python``: a :class:`PythonAgent`; the config's folder is put first on
      ``sys.path`` so ``entry`` may name a module beside ``farm.toml``;
    - a role (simulator, validator, generator, reporter): the agent named by
      its ``uses``, else an :class:`OpenAIAgent` on its connector.

    ``connector_override`` (``-c``) replaces the agent's connector; pass it
    for the target agent only. ``limiter_for(connector_name)`` gives the
    limiter of a connector (default: none). A mistake is a :class:`UsageError`
    naming the agent. ``http``: the :class:`HTTPClient` an HTTP agent sends with (the
    caller closes it); by default the agent makes a small one of its own.
    """
    return _build(config, agent_id, connector_override, limiter_for or (lambda name: NoLimit()), (), http)


def _build(
    config: FarmConfig,
    agent_id: str,
    connector_override: str | None,
    limiter_for: Callable[[str], Limiter],
    chain: tuple[str, ...],
    http: HTTPClient | None = None,
) -> AgentClient:
    if agent_id in chain:
        loop = " -> ".join((*chain, agent_id))
        raise UsageError(f'agents."{chain[0]}".uses: the agents use each other in a loop ({loop})')
    agent = config.agent(agent_id)
    where = f'agents."{agent_id}"'

    def connector() -> Connector | None:
        name = connector_override or agent.connector
        return config.connector(name) if name else None

    lacking = agent.lacks(connector_override or agent.connector)
    if lacking is not None:  # farm test and farm validate refuse it first, naming its line (farm.suite.checks)
        raise UsageError(f"{where}: {lacking[1]}")

    if agent.is_role:
        if agent.uses:
            return _build(config, agent.uses, connector_override, limiter_for, (*chain, agent_id), http)
        conn = connector()
        assert conn is not None
        return OpenAIAgent(conn, agent, http=http, limiter=limiter_for(conn.name))

    if agent.kind == "openai":
        conn = connector()
        assert conn is not None
        return OpenAIAgent(conn, agent, http=http, limiter=limiter_for(conn.name))

    if agent.kind == "http":
        conn = connector()
        limiter = limiter_for(conn.name) if conn is not None else NoLimit()
        return HTTPAgent(conn, agent, http=http, limiter=limiter)

    if agent.kind == "python":
        folder = str(config.base_dir)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return PythonAgent(agent)

    raise UsageError(f'{where}: unknown kind "{agent.kind}"')  # pragma: no cover - the config model forbids it


class TargetClients:
    """The agent under test, as the runner sends to it: on its usual connector (after ``-c``),
    or on the connector a case's or a turn's ``options.connector`` names (more specific than
    ``-c``, so it wins). Each variant is built once and shared by every conversation."""

    def __init__(
        self,
        config: FarmConfig,
        agent_id: str,
        *,
        connector_override: str | None = None,
        limiter_for: Callable[[str], Limiter] | None = None,
        http: HTTPClient | None = None,
        cache: RoleCache | None = None,
    ):
        self.config = config
        self.agent_id = agent_id
        self.connector_override = connector_override
        self.limiter_for = limiter_for
        self.http = http
        self.cache = cache
        """Set when the agent says ``cache = true``: its calls go through the role cache."""
        self._default: AgentClient | None = None
        self._by_connector: dict[str, AgentClient] = {}

    def _build(self, connector: str | None) -> AgentClient:
        client = build_agent(self.config, self.agent_id, connector_override=connector, limiter_for=self.limiter_for, http=self.http)
        if self.cache is None:
            return client
        from farm.roles.cache import CachedAgent

        return CachedAgent(client, self.cache, self.agent_id)

    async def send(self, messages: list[Any], options: dict[str, Any]) -> Any:
        connector = options.get("connector")
        if not connector:
            if self._default is None:
                self._default = self._build(self.connector_override)
            return await self._default.send(messages, options)
        if connector not in self._by_connector:
            try:
                self._by_connector[connector] = self._build(connector)
            except FarmError as exc:
                raise AgentError(f"options.connector: {exc}") from None
        return await self._by_connector[connector].send(messages, options)

    async def aclose(self) -> None:
        for client in (self._default, *self._by_connector.values()):
            if client is not None:
                await client.aclose()
