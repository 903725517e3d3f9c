"""Connector limits (rpm, tpm, concurrency, Retry-After pauses), the same on both engines.

- :mod:`farm.ratelimit.core`: :class:`LimiterCore`, the bookkeeping of one connector;
- :mod:`farm.ratelimit.client`: :class:`PermitClient`, the per-process
  :class:`~farm.agents.permits.Limiter` that batches what it asks of a core.

The local engine keeps one core per connector in its own event loop
(:func:`local_limiters`); the Ray engine runs each core as a cluster-wide actor
(``actors/limiter.py``) and gives every process a ``PermitClient`` onto it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from farm.agents.permits import Limiter, NoLimit
from farm.config import Connector, FarmConfig
from farm.ratelimit.client import CoreRemote, LimiterUnavailable, PermitClient
from farm.ratelimit.core import LimiterCore, Limits

__all__ = ["LimiterCore", "LimiterUnavailable", "Limits", "PermitClient", "default_parallel", "limits_of", "local_limiters"]

DEFAULT_PARALLEL = 128
"""``--parallel`` for a connector without limits."""

ASSUMED_LATENCY = 4.0
"""Seconds per call assumed to turn a connector's rpm into conversations in flight."""

MAX_DERIVED_PARALLEL = 512


def limits_of(connector: Connector) -> Limits | None:
    """The connector's limits, or None when it has none (it is then never limited)."""
    if not (connector.rpm or connector.tpm or connector.max_concurrency):
        return None
    return Limits(connector.rpm or None, connector.tpm or None, connector.max_concurrency or None, connector.burst or None)


def local_limiters(config: FarmConfig) -> Callable[[str], Limiter]:
    """``limiter_for(connector_name)`` for a run in this process: one core and one
    :class:`PermitClient` per limited connector, made on first use; :class:`NoLimit` otherwise."""
    made: dict[str, Limiter] = {}

    def limiter_for(connector_name: str) -> Limiter:
        if connector_name not in made:
            limits = limits_of(config.connector(connector_name))
            if limits is None:
                made[connector_name] = NoLimit()
            else:
                core = LimiterCore(limits.rpm, limits.tpm, limits.max_concurrency, name=connector_name, burst=limits.burst)
                made[connector_name] = PermitClient(
                    connector_name, CoreRemote(core), rpm=limits.rpm, tpm=limits.tpm, max_concurrency=limits.max_concurrency
                )
        return made[connector_name]

    return limiter_for


def default_parallel(connector: Connector) -> int:
    """What ``--parallel`` defaults to for a target on ``connector``.

    ``max_concurrency`` when set; else enough conversations to use the rpm if
    each call took :data:`ASSUMED_LATENCY` seconds (capped at
    :data:`MAX_DERIVED_PARALLEL`); else :data:`DEFAULT_PARALLEL`.
    """
    if connector.max_concurrency:
        return connector.max_concurrency
    if connector.rpm:
        return max(1, min(MAX_DERIVED_PARALLEL, math.ceil(connector.rpm / 60 * ASSUMED_LATENCY)))
    return DEFAULT_PARALLEL
