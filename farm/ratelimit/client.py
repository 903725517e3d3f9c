"""The per-process side of a connector's limits: :class:`PermitClient`, the
:class:`~farm.agents.permits.Limiter` that HTTP clients call, batching what it asks
of the connector's :class:`~farm.ratelimit.core.LimiterCore`::

    HTTP clients               PermitClient                         LimiterCore
    (many per process)         (one per process and connector)      (one per connector: in this process,
                                                                     or a cluster-wide Ray actor)
    acquire(tokens) ────────▶  acquire(holder, want, tokens_each,
                                       idle_slots, correction) ───▶  waits, then grants up to `want`
                               ◀── Grant(granted, slots, pause, contended, share)
    release(used) ──────────▶  release(holder, slots, correction) ─▶  fire and forget, batched
    backoff(seconds) ───────▶  backoff(holder, seconds) ──────────▶  fire and forget
                               sync(holder, held) ─────────────────▶  every 0.1 s while holding slots
                               ◀── LeaseStatus(pause, contended, share)
What a permit is made of, and who keeps it:

- a **request** (rpm) and its **token estimate** (tpm) are consumed: a
  process asks for at most as many as it has requests waiting. The difference
  between estimate and reported usage goes back later in one batched
  correction (a refund or an extra debit), with the next acquire or within 0.1 s.
- a **concurrency slot** is leased: the process keeps it while it is busy,
  hands it to its next waiting request without asking the actor, and gives it
  back once it has been idle for a moment (at once when other processes wait
  and it holds more than its share). A process that stops renewing its lease
  (it died) loses its slots after ``lease_ttl`` seconds.
- a **pause** (a 429 with Retry-After) stops every grant of the connector; the
  processes that hold slots learn of it within one sync.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from farm.errors import LimiterRestarting, LimiterUnavailable
from farm.ratelimit.core import LEASE_TTL, Grant, LeaseStatus, LimiterCore

__all__ = ["BATCH", "CoreRemote", "LimiterRemote", "LimiterRestarting", "LimiterUnavailable", "PermitClient"]

BATCH = 32
"""Most permits one process asks for in one call."""

SYNC_EVERY = 0.1
"""Seconds between a process's housekeeping rounds: batched corrections, idle slots back, lease and pause news."""

PERMIT_TTL = 1.0
"""Seconds a process may keep an unused request permit (its waiter was cancelled) before dropping it."""

PATIENCE = 0.02
"""Seconds an acquire may wait at the actor before the process gives back the slots that fell idle meanwhile."""


class LimiterRemote(Protocol):
    """How a :class:`PermitClient` reaches its connector's limiter (a Ray actor, or a :class:`LimiterCore` in this process).

    It raises :class:`LimiterRestarting` while the core is being replaced, and
    :class:`LimiterUnavailable` once it is gone for good.."""

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> Grant: ...

    def release(self, holder: str, slots: int, token_correction: int) -> None: ...

    def backoff(self, holder: str, seconds: float) -> None: ...

    async def sync(self, holder: str, held: int) -> LeaseStatus: ...


class CoreRemote:
    """A :class:`LimiterCore` in this process's event loop (the local engine, and tests)."""

    def __init__(self, core: LimiterCore):
        self.core = core
        self._tasks: set[asyncio.Task] = set()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> Grant:
        return await self.core.acquire(holder, want, tokens_each, idle_slots, token_correction)

    def release(self, holder: str, slots: int, token_correction: int) -> None:
        self._spawn(self.core.release(holder, slots, token_correction))

    def backoff(self, holder: str, seconds: float) -> None:
        self._spawn(self.core.backoff(holder, seconds))

    async def sync(self, holder: str, held: int) -> LeaseStatus:
        return await self.core.sync(holder, held)


@dataclass
class _Waiter:
    tokens: int
    future: asyncio.Future


_holder_ids = itertools.count()


class PermitClient:
    """The :class:`~farm.agents.permits.Limiter` of one connector in one process, backed by its
    :class:`~farm.ratelimit.core.LimiterCore` (in this process, or the cluster-wide actor).

    It asks for permits in batches and keeps leased slots for its next requests,
    so that the core is asked rarely. Share one instance among all the clients of
    the process. It belongs to the event loop that first uses it.
    """

    def __init__(
        self,
        connector: str,
        remote: LimiterRemote,
        *,
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrency: int | None = None,
        lease_ttl: float = LEASE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.connector = connector
        self._clock = clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{next(_holder_ids)}:{uuid.uuid4().hex[:6]}"
        self._remote = remote
        self._rated = bool(rpm or tpm)
        self._counts_tokens = bool(tpm)
        self._slotted = max_concurrency is not None
        self._sync_every = min(SYNC_EVERY, lease_ttl / 4)
        self._waiters: deque[_Waiter] = deque()
        self._permits: deque[tuple[float, int]] = deque()  # (granted at, tokens reserved) not yet used
        self._slots = 0  # held from the actor
        self._busy = 0  # requests started here and not yet released
        self._declared = 0  # idle slots promised to the actor by the acquire in flight
        self._low = 0  # fewest returnable slots since the last housekeeping round
        self._correction = 0.0  # tokens to debit (+) or refund (-) at the actor, for requests that are over
        self._reserved = 0.0  # tokens reserved by the requests in flight here
        self._paused_until = 0.0
        self._contended = False
        self._share: int | None = None
        self._fetcher: asyncio.Task | None = None
        self._asked = 0  # acquire calls sent
        self._stuck = False  # the acquire in flight has waited longer than PATIENCE
        self._keeper: asyncio.Task | None = None
        self._wake: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve the requests of ``loop`` from now on; what belonged to an earlier loop is over."""
        if self._loop is not None:
            self._waiters.clear()
            self._drop_permits(self._clock(), everything=True)
            self._correction -= self._reserved
            self._busy, self._reserved = 0, 0.0
            self._give_back(self._slots)
            self._remote.release(self.holder, 0, self._take_correction())
            self._fetcher = self._keeper = self._wake = None
            self._declared, self._stuck = 0, False
        self._loop = loop

    # -- the Limiter protocol --------------------------------------------

    async def acquire(self, tokens: int) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._bind(loop)
        if not self._waiters and self._ready(self._clock()):
            self._start()
            return
        waiter = _Waiter(max(0, int(tokens)), asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._pump()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.release(0)  # granted as we were cancelled: the caller will not release it
            else:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def release(self, tokens_used: int) -> None:
        if self._counts_tokens and self._busy:
            # requests are not told apart: each one over takes back an equal part of what is reserved
            part = self._reserved / self._busy
            self._reserved -= part
            self._correction += max(0, int(tokens_used)) - part
        self._busy = max(0, self._busy - 1)
        if self._slotted:
            if self._stuck:
                self._give_back(self._returnable())
            elif self._contended and self._share is not None and self._slots > self._share:
                self._give_back(min(self._returnable(), self._slots - self._share))  # more than our share
        self._pump()

    def _give_back(self, slots: int) -> None:
        if slots > 0:
            self._slots -= slots
            self._remote.release(self.holder, slots, 0)

    def _patience_over(self, asked: int) -> None:
        """Our ask has waited a while at the actor: it may wait for slots idle here, which it cannot
        know of (it was told of those idle when it was sent). From now on, a slot freed goes back."""
        if self._fetcher is not None and self._asked == asked:
            self._stuck = True
            self._give_back(self._returnable())

    def backoff(self, seconds: float) -> None:
        now = self._clock()
        self._paused_until = max(self._paused_until, now + max(0.0, seconds))
        self._drop_permits(now, everything=True)
        self._remote.backoff(self.holder, seconds)

    # -- local bookkeeping -----------------------------------------------

    def _returnable(self) -> int:
        return max(0, self._slots - self._busy - len(self._permits) - self._declared)

    def _ready(self, now: float) -> bool:
        """A request may start now without asking the actor."""
        if now < self._paused_until:
            return False
        if self._rated:
            self._drop_permits(now)
            if not self._permits:
                return False
        return not self._slotted or self._slots - self._busy > 0

    def _start(self) -> None:
        self._busy += 1
        if self._rated:
            _, reserved = self._permits.popleft()
            self._reserved += reserved
        self._low = min(self._low, self._returnable())
        self._housekeep_soon()

    def _drop_permits(self, now: float, everything: bool = False) -> None:
        while self._permits and (everything or now - self._permits[0][0] > PERMIT_TTL):
            _, reserved = self._permits.popleft()
            if self._counts_tokens:
                self._correction -= reserved  # never used: refund its estimate

    def _pump(self) -> None:
        """Start what may start locally, first come first served; ask the actor for the rest."""
        self._serve(self._clock())
        if self._waiters and self._fetcher is None and self._needed() > 0:
            self._fetcher = asyncio.get_running_loop().create_task(self._fetch())

    def _serve(self, now: float) -> None:
        while self._waiters and self._ready(now):
            waiter = self._waiters.popleft()
            if waiter.future.done():  # cancelled; its task has not run its except clause yet
                continue
            self._start()
            waiter.future.set_result(None)
        if self._waiters and now < self._paused_until and self._wake is None:
            # what this process holds may be used again when the pause ends
            self._wake = asyncio.get_running_loop().call_later(self._paused_until - now, self._woken)

    def _woken(self) -> None:
        self._wake = None
        self._pump()

    def _needed(self) -> int:
        if self._rated:
            return len(self._waiters) - len(self._permits)
        return len(self._waiters) - max(0, self._slots - self._busy)

    async def _fetch(self) -> None:
        """Ask the actor for permits while requests wait (one call at a time, up to BATCH permits each)."""
        try:
            while (need := self._needed()) > 0:
                want = min(need, BATCH)
                each = 0
                if self._counts_tokens:
                    first = list(itertools.islice(self._waiters, len(self._permits), len(self._permits) + want))
                    each = math.ceil(sum(w.tokens for w in first) / max(1, len(first)))
                self._declared = self._returnable() if (self._slotted and self._rated) else 0
                self._asked += 1
                if self._slotted and self._rated:
                    asyncio.get_running_loop().call_later(PATIENCE, self._patience_over, self._asked)
                self._low = min(self._low, self._returnable())
                correction = self._take_correction()  # corrections ride along for free
                try:
                    grant = await self._remote.acquire(self.holder, want, each, self._declared, correction)
                except LimiterUnavailable:
                    raise
                except LimiterRestarting:  # ask the new one
                    self._correction += correction
                    await asyncio.sleep(0.2)
                    continue
                except BaseException:
                    self._correction += correction
                    raise
                finally:
                    self._declared = 0
                    self._stuck = False
                now = self._clock()
                self._slots += grant.slots
                if self._rated:
                    self._permits.extend([(now, each)] * grant.granted)
                self._learn(grant, now)
                self._serve(now)
                self._low = min(self._low, self._returnable())
                self._housekeep_soon()
        except Exception as exc:  # noqa: BLE001 - every waiter must hear of it
            waiters, self._waiters = self._waiters, deque()
            for waiter in waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(
                        exc if isinstance(exc, LimiterUnavailable) else LimiterUnavailable(
                            f"Cannot start a request on connector '{self.connector}': its rate limiter failed: {exc!r}"
                        )
                    )
        finally:
            self._fetcher = None

    def _learn(self, answer: Grant | LeaseStatus, now: float) -> None:
        if answer.pause > 0:
            self._paused_until = max(self._paused_until, now + answer.pause)
            self._drop_permits(now, everything=True)
        self._contended = answer.contended
        self._share = answer.share

    # -- housekeeping: batched corrections, idle slots back, lease and pause news --

    def _housekeep_soon(self) -> None:
        if self._keeper is None:
            self._low = self._returnable()
            self._keeper = asyncio.get_running_loop().create_task(self._housekeep())

    def _active(self) -> bool:
        return bool(self._slots or self._busy or self._waiters or self._permits or abs(self._correction) >= 1)

    def _take_correction(self) -> int:
        whole = int(self._correction)
        self._correction -= whole
        return whole

    async def _housekeep(self) -> None:
        try:
            while self._active():
                await asyncio.sleep(self._sync_every)
                now = self._clock()
                self._drop_permits(now)
                back = 0
                if self._slotted:
                    # slots idle since the last round go back, unless requests here wait for them
                    idle = min(self._low, self._returnable())
                    back = idle if not self._waiters else 0
                    self._slots -= back
                    self._low = self._returnable()
                correction = self._take_correction()
                if back or correction:
                    self._remote.release(self.holder, back, correction)
                if self._slotted and (self._slots or self._waiters):
                    try:
                        self._learn(await self._remote.sync(self.holder, self._slots), self._clock())
                    except (LimiterRestarting, LimiterUnavailable):
                        pass  # the actor is restarting; the next round tries again
                    if self._waiters:
                        self._pump()
        finally:
            self._keeper = None

    def __repr__(self) -> str:
        return f"PermitClient({self.connector!r}, slots={self._slots}, busy={self._busy}, waiting={len(self._waiters)})"
