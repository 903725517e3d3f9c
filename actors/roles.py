"""The simulator, validator and generator pools: role agents on actors of their own.

Role calls run here, apart from the session actors, so a slow or rate-limited
judge never stalls the conversations of the agent under test.

Like a session actor, a role actor starts bare and is prepared per run
(:class:`RoleSetup`), so that the next run of this driver process on the same
cluster takes the pool actors of the last one (:data:`~farm.actors.session.WARM_ROLES`);
every call carries the run's token, and a pool actor that restarted (it has no run)
answers :data:`~farm.actors.session.UNPREPARED`: its caller prepares it and asks again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import ray
from farm.actors.session import UNPREPARED

from farm.config import FarmConfig
from farm.results import Blame
from farm.roles.cache import RoleCache, record, tally
from farm.roles.services import LocalRoles
from farm.roles.types import RoleError, RoleOutcome, RoleRequest, SimulatorTurn, Verdict

if TYPE_CHECKING:
    from farm.actors.limiter import LimiterPlan

    from farm.loaded import LoadedCase

__all__ = ["PoolRoles", "RoleActor", "RolePools", "RoleSetup", "RunRoles", "pool_names", "start_pool"]

T = TypeVar("T")

#: Tries of a role call whose pool actor died, and the wait between them (seconds).
RESTART_TRIES = 5
RETRY_PAUSE = 1.0


@dataclass(frozen=True)
class RoleSetup:
    """What a role actor needs for one run (:meth:`RoleActor.prepare`)."""

    run: str
    """The run's token: every call of the run carries it."""
    config: FarmConfig
    limits: LimiterPlan | None = None
    cache: bool = True
    """Whether role calls go through the role cache."""


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)
class RoleActor:
    """One actor of a role pool: answers simulate/validate/generate calls concurrently."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.roles: LocalRoles | None = None

    async def prepare(self, setup: RoleSetup) -> None:
        """Serve the run of ``setup`` from now on (the last run's clients are closed); asked
        again for the same run, it changes nothing."""
        from farm.actors.limiter import limiter_factory

        from farm.agents.transport import preload

        if setup.run == self.run_id and self.roles is not None:
            return
        old = self.roles
        config = setup.config
        self.roles = LocalRoles(config, limiter_for=limiter_factory(setup.limits), cache=RoleCache.for_config(config) if setup.cache else None)
        self.run_id = setup.run
        preload()  # roles are LLMs behind HTTP
        if old is not None:
            await old.aclose()

    async def retire(self, run_id: str) -> None:
        """The run is over: close its clients (unless a newer run prepared this actor meanwhile)."""
        if run_id == self.run_id and self.roles is not None:
            old, self.roles, self.run_id = self.roles, None, None
            await old.aclose()

    def _for(self, run_id: str) -> LocalRoles | None:
        return self.roles if run_id == self.run_id else None

    async def simulate(self, run_id: str, request: RoleRequest) -> RoleOutcome[SimulatorTurn] | str:
        roles = self._for(run_id)
        return UNPREPARED if roles is None else await _counted(roles.simulate(request))

    async def validate(self, run_id: str, request: RoleRequest) -> RoleOutcome[Verdict] | str:
        roles = self._for(run_id)
        return UNPREPARED if roles is None else await _counted(roles.validate(request))

    async def attribute(self, run_id: str, request: RoleRequest) -> RoleOutcome[tuple[Blame, str]] | str:
        """Whose failure a failed dynamic case is: the attributor, served by the validator pool."""
        roles = self._for(run_id)
        return UNPREPARED if roles is None else await _counted(roles.attribute(request))

    async def generate(self, run_id: str, request: RoleRequest) -> RoleOutcome[list[Any]] | str:
        """One batch of a generation: the raw cases the generator wrote."""
        roles = self._for(run_id)
        return UNPREPARED if roles is None else await _counted(roles.generate(request))


async def _counted(call: Awaitable[T]) -> RoleOutcome[T]:
    """``RoleOutcome.of(call)`` with the role calls it made and the cache hits among them, which
    the session actor counts for the case it asked for (:func:`farm.roles.cache.record`)."""
    with tally() as calls:
        outcome = await RoleOutcome.of(call)
    return dataclasses.replace(outcome, calls=calls)


def pool_names(name: str, size: int) -> list[str]:
    """The names of the actors of pool ``name``, known before the pool starts."""
    return [f"{name}-{i}" for i in range(size)]


#: Calls a role actor answers at once.
POOL_CONCURRENCY = 256


def start_pool(names: list[str], setup: RoleSetup, kept: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pool of role actors ``names``, prepared for the run of ``setup``: those in ``kept``
    (name to handle, from this process's last run) as they are, the others started; returns
    the handles by name (keep them for the run)."""
    kept = kept or {}
    pool = {
        name: kept.get(name) or RoleActor.options(name=name, max_concurrency=POOL_CONCURRENCY, scheduling_strategy="SPREAD").remote()
        for name in names
    }
    for handle in pool.values():
        handle.prepare.remote(setup)
    return pool


def take_kept(role: str, size: int, setup: RoleSetup) -> dict[str, Any]:
    """Up to ``size`` role actors of ``role`` kept from this process's last run on this cluster, by
    name, each prepared for ``setup`` (one that does not answer at once is stopped instead)."""
    from farm.actors.session import KEPT_ANSWER_S, WARM_ROLES, kill

    kept: dict[str, Any] = {}
    for _ in range(size):
        entry = WARM_ROLES.take(("role", role))
        if entry is None:
            break
        name, handle = entry
        try:
            ray.get(handle.prepare.remote(setup), timeout=KEPT_ANSWER_S)
        except Exception:  # noqa: BLE001 - gone, or not answering
            kill(handle)
            continue
        kept[name] = handle
    return kept


class PoolRoles:
    """A ``RoleCaller`` that sends role calls to the pools (used inside session actors).

    Pool actors are looked up by name (not passed as handles), so a restarted
    session actor finds them again (ray-project/ray#53727), and when first called:
    the driver starts a pool only once a case that needs it is about to run.
    """

    def __init__(self, pools: RolePools):
        self._names = {"simulate": pools.simulators, "validate": pools.validators, "attribute": pools.validators, "generate": pools.generators}
        self._setup = pools.setup
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
        run = self._setup.run if self._setup is not None else ""
        for attempt in range(1, RESTART_TRIES + 1):
            actor = next(pool)
            try:
                answer = await getattr(actor, method).remote(run, request)
                if isinstance(answer, str) and answer == UNPREPARED and self._setup is not None:
                    await actor.prepare.remote(self._setup)  # it restarted since: prepare it, ask again
                    answer = await getattr(actor, method).remote(run, request)
                if isinstance(answer, str):
                    raise RoleError(f"the {method} pool actor was not prepared for this run")
                break
            except ray.exceptions.RayActorError as exc:
                # the pool actor died: it restarts (max_restarts=-1), or the next one answers
                if attempt == RESTART_TRIES:
                    raise RoleError(f"the {method} pool did not answer after {attempt} tries: {exc}") from None
                await asyncio.sleep(RETRY_PAUSE)
        record(answer.calls.role_calls, answer.calls.cache_hits, answer.calls.cost_usd, answer.calls.requests)
        return answer

    async def simulate(self, request: RoleRequest) -> SimulatorTurn:
        outcome: RoleOutcome[SimulatorTurn] = await self._call("simulate", request)
        return outcome.unwrap()

    async def validate(self, request: RoleRequest) -> Verdict:
        outcome: RoleOutcome[Verdict] = await self._call("validate", request)
        return outcome.unwrap()

    async def attribute(self, request: RoleRequest) -> tuple[Blame, str]:
        outcome: RoleOutcome[tuple[Blame, str]] = await self._call("attribute", request)
        return outcome.unwrap()

    async def generate(self, request: RoleRequest) -> list[Any]:
        """One batch of a generation on the generator pool (:data:`farm.generation.GenerateCall`)."""
        outcome: RoleOutcome[list[Any]] = await self._call("generate", request)
        return outcome.unwrap()


@dataclass(frozen=True)
class RolePools:
    """The names of a run's role pool actors, by role (empty: the run has no such pool), and
    what they serve."""

    simulators: list[str] = field(default_factory=list)
    validators: list[str] = field(default_factory=list)
    generators: list[str] = field(default_factory=list)
    setup: RoleSetup | None = None


class RunRoles:
    """The role pools of one run, each started when the first case that needs it is about to run
    (a generator's: at its first call), so that a run whose cases need none, or a cached
    generation, starts none. The pool actors this process kept from its last run serve again."""

    def __init__(self, setup: RoleSetup, scope: str, size: int, generating: bool, attributing: bool = False):
        self.setup = setup
        self.attributing = attributing
        """Whether a failed dynamic case asks the attributor, which the validator pool serves."""
        self.roles = ("sim", "val", "gen") if generating else ("sim", "val")
        self._kept = {role: take_kept(role, size, setup) for role in self.roles}
        self._members = {role: [*self._kept[role], *pool_names(f"farm-{role}-{scope}", size)[len(self._kept[role]) :]] for role in self.roles}
        self.names = RolePools(self._members["sim"], self._members["val"], self._members.get("gen", []), setup=setup)
        """The pools' actor names, known before any starts (the session actors find them by name)."""
        self._pools: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()  # the generation thread starts the generator pool
        self._generator: PoolRoles | None = None

    def start(self, role: str) -> None:
        with self._lock:
            if role not in self._pools:
                self._pools[role] = start_pool(self._members[role], self.setup, self._kept[role])

    def for_cases(self, cases: list[LoadedCase]) -> list[LoadedCase]:
        """``cases``, once the pools they need have started."""
        for role, index in (("sim", 0), ("val", 1)):
            if role not in self._pools and any(c.needs[index] or role == "val" and self.attributing and c.needs[0] for c in cases):
                self.start(role)
        return cases

    async def generate(self, request: RoleRequest) -> list[Any]:
        """One batch of the run's generation, on the generator pool (started at the first)."""
        if self._generator is None:
            self.start("gen")
            self._generator = PoolRoles(RolePools(generators=self.names.generators, setup=self.setup))
        return await self._generator.generate(request)

    def release(self, keep: bool) -> None:
        """Keep the pool actors for this process's next run on this cluster (a run that ended), or kill them."""
        from farm.actors.session import WARM_ROLES

        with self._lock:
            for role in self.roles:
                for name, handle in (self._pools.get(role) or self._kept[role]).items():
                    if keep:
                        handle.retire.remote(self.setup.run)
                        WARM_ROLES.keep(("role", role), handle, name)
                    else:
                        ray.kill(handle, no_restart=True)
