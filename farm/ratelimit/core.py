"""The limits of one connector, kept in one place: token buckets for requests and tokens
per minute, leased concurrency slots, and pauses after a 429.

Plain asyncio with an injectable clock: the local engine uses :class:`LimiterCore`
in its own event loop, and the Ray engine runs the same class as one named
actor per connector for the whole cluster (``actors/limiter.py``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

__all__ = ["LEASE_TTL", "Grant", "LeaseStatus", "LimiterCore", "Limits", "default_burst"]

LEASE_TTL = 30.0
"""Seconds after its last word before a process's concurrency slots are taken back."""

RPM_HEADROOM = 0.02
"""Requests are paced this much under the rpm: on their way to the endpoint they jitter by a few
milliseconds, and at exactly the limit that would put one request too many in some windows."""

def default_burst(rpm: int) -> int:
    """Requests that may go at once before the rpm's pacing: one second's worth, at least one."""
    return max(1, rpm // 60)

TOKEN_BURST = 1.0
"""Seconds of rate the token bucket holds: token budgets are coarse, and one request may need many."""

MIN_WAIT = 1e-6
"""The shortest sleep the dispatcher takes: a wait of a rounding error would never move a clock."""

COALESCE = 0.005
"""At high rates, a waiting process is answered once this many seconds of permits have built up,
so the actor answers in batches instead of one permit per call."""


@dataclass(frozen=True)
class Limits:
    """A connector's limits; None where it has none of that kind."""

    rpm: int | None = None
    tpm: int | None = None
    max_concurrency: int | None = None
    burst: int | None = None
    """Requests that may go at once before the rpm paces them (None: :func:`default_burst`)."""


class LeaseStatus(NamedTuple):
    """What a holder learns at every call that answers: the connector's pause, and whether to give slots back."""

    pause: float
    """Seconds until the connector's pause (after a 429) ends; 0.0 when it is not paused."""
    contended: bool
    """Other holders are waiting for permits."""
    share: int | None
    """A fair number of slots per holder; None without a concurrency limit."""


class Grant(NamedTuple):
    """What :meth:`LimiterCore.acquire` grants a holder (a tuple: it crosses to every process, often)."""

    granted: int
    """Requests that may start now."""
    slots: int
    """Concurrency slots newly leased to the holder (it uses its idle ones first)."""
    pause: float
    """As in :class:`LeaseStatus`."""
    contended: bool
    """As in :class:`LeaseStatus`."""
    share: int | None
    """As in :class:`LeaseStatus`."""


class _Bucket:
    """A token bucket that may go into debt (a request bigger than the bucket goes when it is full)."""

    def __init__(self, per_minute: float, burst: float, level: float | None = None, capacity: float | None = None):
        """``burst``: seconds of rate it holds (at least 1), unless ``capacity`` says how much.
        ``level``: what it holds at first use (None: full). Nothing accrues before that first use."""
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst if capacity is None else capacity)
        self.level = self.capacity if level is None else min(level, self.capacity)
        self.stamp: float | None = None

    def refill(self, now: float) -> None:
        if self.stamp is None:
            self.stamp = now
        elif now > self.stamp:
            if self.level < self.capacity:  # a refund may have left it above: accrual never does
                self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, amount: float, now: float | None = None) -> float:
        """Seconds until ``amount`` is available (capped at the capacity); 0 when it is now.
        ``now``: the time of the last :meth:`refill`, to count a hold that has not ended yet."""
        need = min(amount, self.capacity)
        if self.level >= need - 1e-9:
            return 0.0
        held = max(0.0, self.stamp - now) if now is not None and self.stamp is not None else 0.0
        return held + (need - self.level) / self.rate

    def hold(self, until: float) -> None:
        """Nothing accrues before ``until`` (a pause), so a pause does not end in a burst."""
        self.stamp = until if self.stamp is None else max(self.stamp, until)


@dataclass
class _Lease:
    slots: int
    expires: float


@dataclass
class _Ask:
    holder: str
    want: int
    tokens_each: int
    idle_slots: int
    future: asyncio.Future


class LimiterCore:
    """The limits of one connector: permits for requests (``rpm``), tokens (``tpm``) and slots (``max_concurrency``).

    Requests: up to ``burst`` go at once (a small suite need not wait), then the rpm paces
    them, one every ``60 / rpm`` seconds (a little under the rpm, and under ``rpm - burst``),
    so that no 60-second window holds more than ``rpm``. A bucket refills only while
    requests do not use it: under load they are paced, never bunched into a burst every second.

    All methods are coroutines so that, as a Ray async actor, they run on its
    event loop. ``clock`` tells the time (seconds, monotonic): a test passes a
    fake one and calls :meth:`wake` after moving it, instead of sleeping. ``holder`` names one caller (a :class:`ClusterLimiter`); any
    call renews that holder's lease. Grants are first come, first served.
    """

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrency: int | None = None,
        lease_ttl: float = LEASE_TTL,
        name: str = "",
        clock: Callable[[], float] = time.monotonic,
        burst: int | None = None,
        replacing: bool = False,
    ):
        """``replacing``: this core takes over from one that was lost, which may have just granted
        its burst; its buckets start empty, so that the two together do not exceed the limits."""
        self.name = name
        self._clock = clock
        burst = min(burst or default_burst(rpm), max(1, rpm // 2)) if rpm else None
        self.limits = Limits(rpm, tpm, max_concurrency, burst)
        # Up to `burst` requests at once, then paced under the rpm and under rpm - burst: a full
        # bucket and a minute of pacing never add up to more than the rpm in 60 seconds.
        # A bucket of tokens may start full too: it is coarse anyway.
        if rpm and burst:
            pace = min(rpm * (1.0 - RPM_HEADROOM), float(rpm - burst))
            self._requests: _Bucket | None = _Bucket(pace, 1.0, 0.0 if replacing else None, capacity=float(burst))
        else:
            self._requests = None
        self._tokens = _Bucket(tpm, TOKEN_BURST, 0.0 if replacing else None) if tpm else None
        self._max_slots = max_concurrency
        self._cap = float(max_concurrency) if max_concurrency else 0.0
        """Slots granted at most now: ``max_concurrency``, halved by each 429 and grown back by one
        slot per ``cap`` requests that end without one (additive increase, multiplicative decrease)."""
        self._ttl = float(lease_ttl)
        self._in_flight = 0
        self._leases: dict[str, _Lease] = {}
        self._queue: deque[_Ask] = deque()
        self._paused_until = 0.0
        self._granted = 0
        self._reclaimed = 0
        self._changed: asyncio.Event | None = None
        self._dispatcher: asyncio.Task | None = None

    # -- the calls -------------------------------------------------------

    async def acquire(
        self, holder: str, want: int = 1, tokens_each: int = 0, idle_slots: int = 0, token_correction: int = 0
    ) -> Grant:
        """Wait until at least one request may start; grant up to ``want`` of them.

        ``tokens_each``: the estimate reserved per request. ``idle_slots``: slots
        the holder already has and will use for the first of these requests.
        ``token_correction``: as in :meth:`release`, for requests already over.
        """
        now = self._clock()
        self._touch(holder, now)
        self._correct(token_correction, now)
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Ask(holder, max(1, int(want)), max(0, int(tokens_each)), max(0, int(idle_slots)), future))
        self._kick()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as the caller went away: take the slots back
                await self.release(holder, future.result().slots, 0)
            self._kick()  # the dispatcher may be waiting for this ask
            raise

    async def release(self, holder: str, slots: int = 0, token_correction: int = 0) -> None:
        """Give back ``slots`` and correct the token count by ``token_correction``
        (reported usage minus estimate: more debit when positive, a refund when negative)."""
        now = self._clock()
        lease = self._leases.get(holder)
        if lease is not None:
            lease.expires = now + self._ttl
            back = min(max(0, int(slots)), lease.slots)  # slots already taken back stay taken
            lease.slots -= back
            self._in_flight -= back
            if back and self._max_slots and self._cap < self._max_slots and now >= self._paused_until:
                self._cap = min(float(self._max_slots), self._cap + back / self._cap)
        self._correct(token_correction, now)
        self._kick()

    def _correct(self, token_correction: int, now: float) -> None:
        if self._tokens is not None and token_correction:
            self._tokens.refill(now)
            # a refund gives back what was reserved, even above the capacity: it was taken from there
            self._tokens.level -= token_correction

    async def backoff(self, holder: str, seconds: float) -> None:
        """The endpoint said "too many requests": grant nothing on this connector for ``seconds``."""
        now = self._clock()
        self._touch(holder, now)
        until = now + max(0.0, float(seconds))
        if self._max_slots and now >= self._paused_until:  # once per pause: its 429s are one signal
            self._cap = max(1.0, self._cap / 2)
        if until > self._paused_until:
            self._paused_until = until
            for bucket in (self._requests, self._tokens):
                if bucket is not None:
                    bucket.refill(now)
                    bucket.hold(until)
        self._kick()

    async def sync(self, holder: str, held: int = 0) -> LeaseStatus:
        """Renew ``holder``'s lease; it says it holds ``held`` slots.

        The limiter's count of a holder's slots is never below the holder's own
        (grants are counted here first, returns there first), unless the limiter
        lost count: it was restarted, or the lease ran out while the holder was
        merely slow. Then what the holder says it holds is counted again.
        """
        now = self._clock()
        lease = self._touch(holder, now)
        if self._max_slots and held > lease.slots:
            self._in_flight += int(held) - lease.slots
            lease.slots = int(held)
        return LeaseStatus(max(0.0, self._paused_until - now), self._contended(holder), self._share())

    async def stats(self) -> dict[str, Any]:
        """Counters for tests and benchmarks."""
        now = self._clock()
        self._reap(now)
        paused = max(0.0, self._paused_until - now)
        return {
            "limits": asdict(self.limits),
            "granted": self._granted,
            "in_flight": self._in_flight,
            "cap": int(self._cap) if self._max_slots else None,
            "paused_until": time.time() + paused if paused else 0.0,
            "paused_for": paused,
            "waiting": sum(1 for ask in self._queue if not ask.future.done()),
            "holders": len(self._leases),
            "reclaimed": self._reclaimed,
            "pid": os.getpid(),
        }

    def wake(self) -> None:
        """Look at the queue again now (after a fake clock moved)."""
        self._kick()

    # -- the dispatcher --------------------------------------------------

    def _kick(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        self._changed.set()
        if self._queue and (self._dispatcher is None or self._dispatcher.done()):
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())

    async def _dispatch(self) -> None:
        """Serve the queue head by head, sleeping exactly until the head's next permit is due."""
        assert self._changed is not None
        while self._queue:
            head = self._queue[0]
            if head.future.done():  # its caller went away
                self._queue.popleft()
                continue
            now = self._clock()
            self._reap(now)
            n, wait = self._plan(head, now)
            if n:
                self._queue.popleft()
                head.future.set_result(self._grant(head, n, now))
                continue
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=wait)
            except TimeoutError:
                pass

    def _plan(self, ask: _Ask, now: float) -> tuple[int, float | None]:
        """Permits ``ask`` may have now, or ``(0, seconds to wait)`` (None: until something changes)."""
        if now < self._paused_until:
            return 0, self._paused_until - now
        n = ask.want
        wait = 0.0
        if self._requests is not None:
            bucket = self._requests
            bucket.refill(now)
            target = min(n, max(1, int(bucket.rate * COALESCE)))
            wait = max(wait, bucket.wait(target, now))
            n = min(n, max(1, int(bucket.level + 1e-9)))
        if self._tokens is not None:
            bucket = self._tokens
            bucket.refill(now)
            each = max(1, ask.tokens_each)
            wait = max(wait, bucket.wait(each))
            n = min(n, max(1, int(bucket.level // each)))
        if self._max_slots is not None:
            lease = self._leases.get(ask.holder)
            idle = min(ask.idle_slots, lease.slots if lease else 0)
            free = idle + max(0, int(self._cap) - self._in_flight)
            if free < 1:
                return 0, self._next_expiry(now)
            n = min(n, free)
        if wait > 0:
            return 0, max(wait, MIN_WAIT)
        return n, None

    def _grant(self, ask: _Ask, n: int, now: float) -> Grant:
        if self._requests is not None:
            self._requests.level -= n
        if self._tokens is not None:
            self._tokens.level -= n * ask.tokens_each
        lease = self._touch(ask.holder, now)
        new = 0
        if self._max_slots is not None:
            new = max(0, n - min(ask.idle_slots, lease.slots))
            lease.slots += new
            self._in_flight += new
        self._granted += n
        return Grant(n, new, 0.0, self._contended(ask.holder), self._share())

    # -- leases ----------------------------------------------------------

    def _touch(self, holder: str, now: float) -> _Lease:
        lease = self._leases.get(holder)
        if lease is None:
            lease = self._leases[holder] = _Lease(0, now + self._ttl)
        else:
            lease.expires = now + self._ttl
        return lease

    def _reap(self, now: float) -> None:
        """Take back the slots of holders that stopped renewing their lease."""
        for holder in [h for h, lease in self._leases.items() if lease.expires <= now]:
            lease = self._leases.pop(holder)
            self._in_flight -= lease.slots
            self._reclaimed += lease.slots

    def _next_expiry(self, now: float) -> float | None:
        expiries = [lease.expires for lease in self._leases.values() if lease.slots]
        return max(0.0, min(expiries) - now) + 0.001 if expiries else None

    def _contended(self, holder: str) -> bool:
        return any(ask.holder != holder and not ask.future.done() for ask in self._queue)

    def _share(self) -> int | None:
        if self._max_slots is None:
            return None
        active = {h for h, lease in self._leases.items() if lease.slots} | {a.holder for a in self._queue if not a.future.done()}
        return max(1, int(self._cap) // max(1, len(active)))
