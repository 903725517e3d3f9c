"""A generator agent as a source of cases: it is asked in batches, as many at once as
``parallel`` allows (the generator connector's ``max_concurrency``; its rpm/tpm limiter paces the
calls on top of that), and every request differs, so that a deterministic model writes new cases:
the batch number, the batch's slice of the coverage lists (``focus=refunds,travel``), ``seed``,
and a short list of what is already written, to avoid.

It stops at ``count`` cases, when ``patience`` batches in a row added nothing new, or when
:data:`SAME_FAILURES` batches in a row failed the same way (the next would too; the stop reason
says so in one sentence, and a row of failures is one problem line, with its count).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from farm.ratelimit import default_parallel
from farm.results import add_cost
from farm.roles.cache import tally
from farm.roles.player import player_of
from farm.roles.types import CallTally, RoleRequest
from farm.secrets import process_scrubber

if TYPE_CHECKING:
    from farm.config import AgentConfig, Connector, FarmConfig
    from farm.generation.intake import Intake, OnProblem, Slice
    from farm.generation.query import Settings
    from farm.loaded import LoadedCase

__all__ = ["BATCHES_IN_FLIGHT", "SAME_FAILURES", "AgentBatches", "GenerateCall", "generator_parts", "parallel_of"]

GenerateCall = Callable[[RoleRequest], Awaitable[list[Any]]]
"""One generator role call: the request (its ``metadata`` says what to write) to the raw case
objects of the answer; raises :class:`~farm.roles.types.RoleError` when the generator fails."""

SAME_FAILURES = 2
"""Batches in a row whose generator call failed the same way before generation stops: a
generator that answers prose, or an error every time, fails every batch alike."""

BATCHES_IN_FLIGHT = 8
"""Batches in flight when the generator's connector sets no ``max_concurrency`` or ``rpm``."""


def generator_parts(config: FarmConfig, agent_id: str) -> tuple[AgentConfig, AgentConfig, Connector | None]:
    """The generator agent, the agent that plays it, and its connector (or None)."""
    agent = config.agent(agent_id)
    player = player_of(config, agent)
    name = player.connector or agent.connector
    return agent, player, config.connectors.get(name) if name else None


def parallel_of(config: FarmConfig, agent_id: str | None) -> int:
    """Batches of the generator ``agent_id`` in flight at once (1 for a script)."""
    if agent_id is None or agent_id not in config.agents:
        return 1
    _, _, connector = generator_parts(config, agent_id)
    limit = default_parallel(connector) if connector is not None and (connector.max_concurrency or connector.rpm) else BATCHES_IN_FLIGHT
    return max(1, limit)


@dataclass
class _Ask:
    number: int
    slice: Slice
    count: int


@dataclass
class _Failures:
    """The batches in a row whose generator call failed the same way: one problem line for them
    all, said when the row ends (a row that stops generation is said by its stop reason)."""

    origin: str
    error: str | None = None
    first: int = 0
    count: int = 0

    def batch(self, number: int, error: str | None) -> str | None:
        """One batch's outcome (``error``: None when the call answered); the line of the row it ends."""
        if error is not None and error == self.error:
            self.count += 1
            return None
        which = f"batch {self.first}" if self.count == 1 else f"{self.count} batches in a row from batch {self.first}"
        ended = f"{self.origin} {which}: the generator failed: {self.error}" if self.count else None
        self.error, self.first, self.count = error, number, int(error is not None)
        return ended


class AgentBatches:
    """The batches of the generator agent ``agent_id``, taken in by ``intake``; its role calls are
    added to ``role_calls``."""

    def __init__(self, intake: Intake, settings: Settings, agent_id: str, parallel: int, role_calls: CallTally):
        self.intake = intake
        self.settings = settings
        self.agent_id = agent_id
        self.parallel = parallel
        self.role_calls = role_calls
        self._number = 0
        self._received = 0
        self._accepted = 0

    def _next_ask(self) -> _Ask | None:
        """The next batch to ask for, or None while the batches in flight may be enough."""
        # Cases in flight count at the share of answers kept so far (malformed and repeated ones
        # are dropped), so that the last batches ask for enough and no extra round is needed.
        slices = self.intake.slices
        rate = max(0.5, self._accepted / self._received) if self._received else 1.0
        cell = max(slices, key=lambda c: (c.quota - c.kept - rate * c.asked, -slices.index(c)))
        needed = cell.quota - cell.kept - rate * cell.asked
        if needed <= 0:
            return None
        count = min(self.settings.batch, math.ceil(needed / rate))
        cell.asked += count
        self._number += 1
        return _Ask(self._number, cell, count)

    def _request(self, ask: _Ask) -> RoleRequest:
        metadata = {
            **self.settings.metadata,
            **ask.slice.values,
            "count": ask.count,
            "total": self.intake.asked,
            "batch_number": ask.number,
            "slice": ask.slice.values,
            "avoid": self.intake.avoid(),
        }
        return RoleRequest(self.agent_id, [], metadata)

    async def _call(self, generate: GenerateCall, request: RoleRequest) -> tuple[list[Any], str | None, int]:
        with tally() as calls:
            try:
                items, error = await generate(request), None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the generator's failure (a RoleError; on Ray, a lost pool)
                items, error = [], process_scrubber().scrub(str(exc) or type(exc).__name__)  # it may echo what it was sent
        self.role_calls.add(calls.role_calls, calls.cache_hits, calls.cost_usd, calls.requests)
        self.intake.stats.cost_usd = add_cost(self.intake.stats.cost_usd, calls.cost_usd)
        return items if isinstance(items, list) else [items], error, calls.requests

    def _first_number(self) -> int:
        """Batch numbers go on after a resumed run's, so its requests are new ones."""
        kept = self.intake.stats.kept
        return 1 + kept // self.settings.batch if kept else 1

    async def cases(self, generate: GenerateCall, on_problem: OnProblem) -> AsyncIterator[list[LoadedCase]]:
        """The accepted cases of each batch, as it is answered (``generate`` answers the requests)."""
        intake, stats, patience = self.intake, self.intake.stats, self.settings.patience
        pending: dict[asyncio.Task[tuple[list[Any], str | None, int]], _Ask] = {}
        self._number = self._first_number() - 1
        streak = 0
        failures = _Failures(intake.origin)
        try:
            while not intake.full:
                while len(pending) < self.parallel and (ask := self._next_ask()) is not None:
                    pending[asyncio.ensure_future(self._call(generate, self._request(ask)))] = ask
                if not pending:
                    break
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=lambda t: pending[t].number):
                    ask = pending.pop(task)
                    ask.slice.asked -= ask.count
                    items, error, sent = task.result()
                    stats.batches += 1
                    stats.calls += sent
                    if (ended := failures.batch(ask.number, error)) is not None:
                        intake.problem(ended, on_problem)
                    if error is not None:
                        intake.error = error
                    accepted = intake.take(items, ask.number, ask.slice, on_problem)
                    self._received += len(items)
                    self._accepted += len(accepted)
                    streak = 0 if accepted else streak + 1
                    if accepted:
                        intake.error = None
                    yield accepted
                    if intake.full:
                        return
                    if failures.count >= min(SAME_FAILURES, patience):
                        in_a_row = f" {failures.count} batches in a row" if failures.count > 1 else ""
                        intake.stop(f"the generator failed{in_a_row}: {error}")
                        return
                    if streak >= patience:
                        if intake.error is not None:
                            intake.stop(f"the generator failed: {intake.error}")
                        else:
                            intake.stop(f"the last {streak} batches repeated earlier cases" if not stats.malformed else f"the last {streak} batches added no new valid case")
                        return
        finally:
            stats.calls += sum(1 for task in pending if not task.done())  # sent, then no longer needed
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
