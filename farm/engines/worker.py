"""What runs conversations inside one process: the local engine's loop, or one session actor.

:class:`CaseWorker` is built the same way for both engines: the clients of every agent
under test (each built on first use and shared by every conversation), the services
(roles, scripts, a person at a terminal) and each agent's run settings stamped with the
worker's name. The engines differ only in how role calls travel (:class:`~farm.roles.services.LocalRoles`
in process, the role pools on Ray) and in who asks the person.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from farm.agents.factory import TargetClients
from farm.agents.transport import HTTPClient
from farm.config import FarmConfig
from farm.conversation.runner import RunSettings, run_case
from farm.loaded import LoadedCase
from farm.results import CaseResult
from farm.roles.cache import target_cache
from farm.roles.services import FarmServices, RoleCaller
from farm.roles.types import HumanRequest
from farm.scripts import ScriptResolver

if TYPE_CHECKING:
    from farm.conversation.replay import Replay
    from farm.traces.capture import ReceivedSpans

__all__ = ["CaseWorker"]


class CaseWorker:
    """Runs one case on one agent at a time, as many at once as its caller starts.

    ``agent_settings``: the runner's settings per agent under test; ``worker``: the name every
    result records (``local@host:pid``, ``session-0@ip:pid``); ``limiter_for``: the connectors'
    rate limiters as this process reaches them; ``ask_human``: the person answering in
    interactive mode, if any; ``replay``: a rescore's recording, played instead of calling agents.
    """

    def __init__(
        self,
        config: FarmConfig,
        agent_settings: dict[str, RunSettings],
        *,
        worker: str,
        roles: RoleCaller,
        http: HTTPClient,
        limiter_for: Callable[[str], Any] | None,
        connector_override: str | None = None,
        ask_human: Callable[[HumanRequest], Awaitable[str | None]] | None = None,
        replay: Replay | None = None,
        received_spans: ReceivedSpans | None = None,
    ):
        self.settings = {agent: dataclasses.replace(s, worker=worker) for agent, s in agent_settings.items()}
        self.replay = replay
        self.targets: dict[str, TargetClients] = {}
        if replay is None:  # a rescore calls no agent: no client for one is opened
            self.targets = {
                agent: TargetClients(
                    config,
                    agent,
                    connector_override=connector_override,
                    limiter_for=limiter_for,
                    http=http,
                    cache=target_cache(config, agent, s.cache),
                )
                for agent, s in self.settings.items()
            }
        self.services = FarmServices(config, roles, ScriptResolver(config.scripts_dir), human=ask_human, received_spans=received_spans)

    async def run(self, loaded: LoadedCase, run_index: int, agent: str) -> CaseResult:
        """Run one case on ``agent`` to its end (or replay it). Raises only for the farm's own faults."""
        settings = self.settings[agent]
        try:
            if self.replay is not None:
                return await self.replay.run(loaded, run_index, self.services, settings)
            return await run_case(loaded, self.targets[agent], self.services, settings)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # the run cancelled it: it is ending
                raise
            # an agent's own CancelledError: the case ends as an error, not as a case its engine waits for
            raise RuntimeError("the case ended in the agent's own CancelledError") from None

    async def aclose(self) -> None:
        for target in self.targets.values():
            await target.aclose()
