"""One rate limiter per connector for the whole cluster: rpm, tpm, concurrency and Retry-After.

Ray has no cluster-wide rate limiter, so each limited connector gets one named
async actor (:class:`ConnectorLimiter`): the plain
:class:`~farm.ratelimit.core.LimiterCore` with actor options. Every process that
calls connectors asks it through one :class:`~farm.ratelimit.client.PermitClient`
per connector (see :func:`limiter_factory`), which batches, so the actor is asked
rarely (RAY_NOTES, "Rate limiting"). :class:`ActorRemote` is how a
``PermitClient`` reaches the actor; it turns Ray's errors into the client's
:class:`LimiterRestarting` and :class:`LimiterUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import ActorDiedError, RayActorError

from farm.agents.permits import Limiter, NoLimit
from farm.config import FarmConfig
from farm.ratelimit import Limits, limits_of
from farm.ratelimit.client import LimiterRestarting, LimiterUnavailable, PermitClient
from farm.ratelimit.core import LEASE_TTL, Grant, LeaseStatus, LimiterCore

__all__ = ["ActorRemote", "ConnectorLimiter", "limiter_factory", "limiter_name", "start_limiters"]

LOOKUP_TIMEOUT = 10.0
"""Seconds a process keeps looking for a limiter actor that is not registered yet."""

ACTOR_CONCURRENCY = 10_000
"""Calls the limiter actor serves at once (each process waits with at most one acquire)."""


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=ACTOR_CONCURRENCY)
class ConnectorLimiter(LimiterCore):
    """The cluster-wide limiter of one connector: :class:`LimiterCore` as a named, restartable Ray actor.

    A restart forgets the counts; the processes that hold slots report them
    again at their next sync, and the buckets start empty (the lost actor may have
    just granted its burst).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, replacing=ray.get_runtime_context().was_current_actor_reconstructed, **kwargs)


@contextlib.contextmanager
def _translated(actor_name: str) -> Iterator[None]:
    try:
        yield
    except ActorDiedError as exc:
        raise LimiterUnavailable(f"Cannot start a request: the rate limiter '{actor_name}' is gone ({type(exc).__name__}).") from None
    except RayActorError as exc:
        raise LimiterRestarting(str(exc)) from None


class ActorRemote:
    """The named limiter actor, looked up on first use (handles are not passed to restartable actors)."""

    def __init__(self, actor_name: str, namespace: str | None = None):
        self.actor_name = actor_name
        self.namespace = namespace
        self._handle: Any = None

    async def handle(self) -> Any:
        if self._handle is None:
            deadline = time.monotonic() + LOOKUP_TIMEOUT
            while True:
                try:
                    self._handle = ray.get_actor(self.actor_name, namespace=self.namespace)
                    break
                except ValueError:
                    if time.monotonic() > deadline:
                        raise LimiterUnavailable(
                            f"Cannot start a request: the rate limiter '{self.actor_name}' is not running "
                            f"(it is started by the driver with start_limiters)."
                        ) from None
                    await asyncio.sleep(0.2)
        return self._handle

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> Grant:
        handle = await self.handle()
        with _translated(self.actor_name):
            return await handle.acquire.remote(holder, want, tokens_each, idle_slots, token_correction)

    def _known(self) -> Any:
        if self._handle is None:  # a backoff before any request: one quick look-up
            try:
                self._handle = ray.get_actor(self.actor_name, namespace=self.namespace)
            except ValueError:
                return None
        return self._handle

    def release(self, holder: str, slots: int, token_correction: int) -> None:
        handle = self._known()
        if handle is not None:
            handle.release.remote(holder, slots, token_correction)  # fire and forget

    def backoff(self, holder: str, seconds: float) -> None:
        handle = self._known()
        if handle is not None:
            handle.backoff.remote(holder, seconds)

    async def sync(self, holder: str, held: int) -> LeaseStatus:
        handle = await self.handle()
        with _translated(self.actor_name):
            return await handle.sync.remote(holder, held)


# -- what the driver and the actors call -------------------------------------


def limiter_name(scope: str, connector: str) -> str:
    """The Ray name of a connector's limiter actor in one run."""
    return f"farm-limiter:{scope}:{connector}"


@dataclass(frozen=True)
class LimiterPlan:
    """Where a run's limiter actors are, for every actor that calls connectors (small and picklable)."""

    scope: str
    """The run's part of every limiter actor's name (:func:`limiter_name`)."""
    namespace: str | None
    lease_ttl: float
    connectors: dict[str, Limits]
    """Only the limited connectors, with the limits they have."""


def start_limiters(
    config: FarmConfig,
    connector_names: list[str],
    scope: str,
    *,
    lease_ttl: float = LEASE_TTL,
) -> tuple[dict[str, Any], LimiterPlan]:
    """Start (or find) the limiter actor of each named connector that has rpm, tpm or max_concurrency.

    Returns ``(handles, plan)``. Keep ``handles`` for the whole run: a named
    actor without a handle is garbage-collected. Pass ``plan`` to every actor
    that calls connectors.
    """
    handles: dict[str, Any] = {}
    connectors: dict[str, Limits] = {}
    for name in dict.fromkeys(connector_names):
        limits = limits_of(config.connector(name))
        if limits is None:
            continue
        actor_name = limiter_name(scope, name)
        handles[name] = ConnectorLimiter.options(name=actor_name, get_if_exists=True).remote(
            limits.rpm, limits.tpm, limits.max_concurrency, lease_ttl, actor_name, burst=limits.burst
        )
        connectors[name] = limits
    namespace = ray.get_runtime_context().namespace if ray.is_initialized() else None
    return handles, LimiterPlan(scope, namespace, lease_ttl, connectors)


def limiter_factory(plan: LimiterPlan | None) -> Callable[[str], Limiter] | None:
    """``limiter_for(connector_name)`` for an actor's clients, from the plan the driver passed down.

    One :class:`PermitClient` per connector for the whole process (made on
    first use, its actor looked up on its first request); :class:`NoLimit` for
    a connector without limits. None when ``plan`` is None (no limiters).
    """
    if plan is None:
        return None
    made: dict[str, Limiter] = {}

    def limiter_for(connector_name: str) -> Limiter:
        limits = plan.connectors.get(connector_name)
        if limits is None:
            return NoLimit()
        if connector_name not in made:
            made[connector_name] = PermitClient(
                connector_name,
                ActorRemote(limiter_name(plan.scope, connector_name), plan.namespace),
                rpm=limits.rpm,
                tpm=limits.tpm,
                max_concurrency=limits.max_concurrency,
                lease_ttl=plan.lease_ttl,
            )
        return made[connector_name]

    return limiter_for
