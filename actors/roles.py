"""The simulator, validator and generator pools: role agents on actors of their own.

Role calls run here, apart from the session actors, so a slow or rate-limited
judge never stalls the conversations of the agent under test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import ray

from farm.config import FarmConfig
from farm.roles.cache import RoleCache, record, tally
from farm.roles.services import LocalRoles
from farm.roles.types import RoleError, RoleOutcome, RoleRequest, SimulatorTurn, Verdict

if TYPE_CHECKING:
    from farm.actors.limiter import LimiterPlan

__all__ = ["PoolRoles", "RoleActor", "RolePools", "pool_names", "start_pool"]

T = TypeVar("T")

#: Tries of a role call whose pool actor died, and the wait between them (seconds).
RESTART_TRIES = 5
RESTART_WAIT = 1.0


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class RoleActor:
    """One actor of a role pool: answers simulate/validate calls concurrently."""

    def __init__(self, config: FarmConfig, limits: LimiterPlan | None = None, cache: bool = True):
        from farm.actors.limiter import limiter_factory

        from farm.agents.transport import preload

        self.roles = LocalRoles(config, limiter_for=limiter_factory(limits), cache=RoleCache.for_config(config) if cache else None)
        preload()  # roles are LLMs behind HTTP

    async def simulate(self, request: RoleRequest) -> RoleOutcome[SimulatorTurn]:
        return await _counted(self.roles.simulate(request))

    async def validate(self, request: RoleRequest) -> RoleOutcome[Verdict]:
        return await _counted(self.roles.validate(request))

    async def generate(self, request: RoleRequest) -> RoleOutcome[list[Any]]:
        """One batch of a generation: the raw cases the generator wrote."""
        return await _counted(self.roles.generate(request))


async def _counted(call: Awaitable[T]) -> RoleOutcome[T]:
    """``RoleOutcome.of(call)`` with the role calls it made and the cache hits among them, which
    the session actor counts for the case it asked for (:func:`farm.roles.cache.record`)."""
    with tally() as calls:
        outcome = await RoleOutcome.of(call)
    return dataclasses.replace(outcome, calls=calls)


def pool_names(name: str, size: int) -> list[str]:
    """The names of the actors of pool ``name``, known before the pool starts."""
    return [f"{name}-{i}" for i in range(size)]


def start_pool(name: str, size: int, config: FarmConfig, limits: LimiterPlan | None, concurrency: int = 256, cache: bool = True) -> dict[str, Any]:
    """Start a pool of ``size`` named role actors; returns their handles by name (keep them for the run).
    ``cache``: whether their role calls go through the role cache."""
    return {
        actor: RoleActor.options(name=actor, max_concurrency=concurrency, scheduling_strategy="SPREAD").remote(config, limits, cache)
        for actor in pool_names(name, size)
    }


class PoolRoles:
    """A ``RoleCaller`` that sends role calls to the pools (used inside session actors).

    Pool actors are looked up by name (not passed as handles), so a restarted
    session actor finds them again (ray-project/ray#53727), and when first called:
    the driver starts a pool only once a case that needs it is about to run.
    """

    def __init__(self, simulators: list[str] = [], validators: list[str] = [], generators: list[str] = []):  # noqa: B006 - never mutated
        self._names = {"simulate": simulators, "validate": validators, "generate": generators}
        self._pools: dict[str, Iterator[Any]] = {}

    def _pool(self, method: str) -> Iterator[Any]:
        pool = self._pools.get(method)
        if pool is None:
            names = self._names[method]
            if not names:
                raise RoleError(f"this run has no {method} pool")
            pool = self._pools[method] = itertools.cycle([ray.get_actor(n) for n in names])
        return pool

    async def _call(self, method: str, request: RoleRequest) -> RoleOutcome[Any]:
        pool = self._pool(method)
        for attempt in range(1, RESTART_TRIES + 1):
            try:
                answer = await getattr(next(pool), method).remote(request)
                break
            except ray.exceptions.RayActorError as exc:
                # the pool actor died: it restarts (max_restarts=-1), or the next one answers
                if attempt == RESTART_TRIES:
                    raise RoleError(f"the {method} pool did not answer after {attempt} tries: {exc}") from None
                await asyncio.sleep(RESTART_WAIT)
        record(answer.calls.role_calls, answer.calls.cache_hits, answer.calls.cost_usd)
        return answer

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        outcome: RoleOutcome[SimulatorTurn] = await self._call("simulate", request)
        return outcome.unwrap()

    async def validate(self, request: RoleRequest) -> Verdict:
        outcome: RoleOutcome[Verdict] = await self._call("validate", request)
        return outcome.unwrap()

    async def generate(self, request: RoleRequest) -> list[Any]:
        """One batch of a generation on the generator pool (:data:`farm.suite.generation.GenerateCall`)."""
        outcome: RoleOutcome[list[Any]] = await self._call("generate", request)
        return outcome.unwrap()


@dataclass(frozen=True)
class RolePools:
    """The names of a run's role pool actors, by role (empty: the run has no such pool)."""

    simulators: list[str] = field(default_factory=list)
    validators: list[str] = field(default_factory=list)
    generators: list[str] = field(default_factory=list)
