"""One rate limiter per connector for the whole cluster: rpm, tpm, concurrency and Retry-After.

Ray has no cluster-wide rate limiter, so each limited connector gets one named
async actor (:class:`ConnectorLimiter`) that every process asks for permits.
Asking it once per request would make a fast agent several times slower
(RAY_NOTES, "Rate limiting"), so each process talks to it through one
:class:`ClusterLimiter`, the :class:`~farm.agents.limiter.Limiter` its HTTP
clients call, which batches::

    HTTP clients               ClusterLimiter                       ConnectorLimiter
    (many per process)         (one per process and connector)      (one per connector, cluster-wide)

    acquire(tokens) ────────▶  acquire(holder, want, tokens_each,
                                       idle_slots, correction) ───▶  waits, then grants up to `want`
                               ◀── {granted, slots, pause, contended, share}
    release(used) ──────────▶  release(holder, slots, correction) ─▶  fire and forget, batched
    backoff(seconds) ───────▶  backoff(holder, seconds) ──────────▶  fire and forget
                               sync(holder, held) ─────────────────▶  every 0.1 s while holding slots

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

Requests are paced, not bunched: the request bucket holds a fifth of a second
of rate (:data:`REQUEST_BURST`), starts (at its first request, and after a
restart) with a single permit, refills at 98 % of the rpm
(:data:`RPM_HEADROOM`), and no more than the limit's share is ever granted in
one second, so an endpoint counting per second sees at most the limit even
when requests jitter by some milliseconds on their way.

The bookkeeping is plain asyncio (:class:`LimiterCore`); the Ray actor is that
class with actor options, so its logic can be tested without a cluster.
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
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

import ray
from ray.exceptions import ActorDiedError, RayActorError

from farm.agents.base import AgentConnectionError
from farm.agents.limiter import Limiter, NoLimit
from farm.config import Connector, FarmConfig

__all__ = [
    "BATCH",
    "LEASE_TTL",
    "ActorRemote",
    "ClusterLimiter",
    "ConnectorLimiter",
    "CoreRemote",
    "LimiterCore",
    "LimiterRemote",
    "LimiterUnavailable",
    "default_parallel",
    "limiter_factory",
    "limiter_name",
    "start_limiters",
]

BATCH = 32
"""Most permits one process asks for in one call."""

LEASE_TTL = 30.0
"""Seconds after its last word before a process's concurrency slots are taken back."""

RPM_HEADROOM = 0.02
"""Requests are paced this much under the rpm: on their way to the endpoint they jitter by a few
milliseconds, and at exactly the limit that would put one request too many in some 1-second windows."""

REQUEST_BURST = 0.2
"""Seconds of rate the request bucket holds (at least one request). Small on purpose: a process
that was not scheduled for a moment gets back at most this much at once; with a bucket of a whole
second, such bursts met the 1-second cap and came back every second, bunched, on a busy machine."""

TOKEN_BURST = 1.0
"""Seconds of rate the token bucket holds: token budgets are coarse, and one request may need many."""

COALESCE = 0.005
"""At high rates, a waiting process is answered once this many seconds of permits have built up,
so the actor answers in batches instead of one permit per call."""

SYNC_EVERY = 0.1
"""Seconds between a process's housekeeping rounds: batched corrections, idle slots back, lease and pause news."""

PERMIT_TTL = 1.0
"""Seconds a process may keep an unused request permit (its waiter was cancelled) before dropping it."""

PATIENCE = 0.02
"""Seconds an acquire may wait at the actor before the process gives back the slots that fell idle meanwhile."""

LOOKUP_TIMEOUT = 10.0
"""Seconds a process keeps looking for a limiter actor that is not registered yet."""

ACTOR_CONCURRENCY = 10_000
"""Calls the limiter actor serves at once (each process waits with at most one acquire)."""

DEFAULT_PARALLEL = 128
"""``--parallel`` for a connector without limits."""

ASSUMED_LATENCY = 4.0
"""Seconds per call assumed to turn a connector's rpm into conversations in flight."""

MAX_DERIVED_PARALLEL = 512


class LimiterUnavailable(AgentConnectionError):
    """The connector's cluster-wide limiter cannot be reached, so no request may start."""


# -- the bookkeeping (plain asyncio; the actor below is this class) -----------


class _Bucket:
    """A token bucket that may go into debt (a request bigger than the bucket goes when it is full)."""

    def __init__(self, per_minute: float, burst: float, level: float | None = None):
        """``burst``: seconds of rate it holds (at least 1). ``level``: what it holds at first use
        (None: full). Nothing accrues before that first use."""
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst)
        self.level = self.capacity if level is None else min(level, self.capacity)
        self.stamp: float | None = None

    def refill(self, now: float) -> None:
        if self.stamp is None:
            self.stamp = now
        elif now > self.stamp:
            if self.level < self.capacity:  # a refund may have left it above: accrual never does
                self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, amount: float) -> float:
        """Seconds until ``amount`` is available (capped at the capacity); 0 when it is now."""
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need - 1e-9 else (need - self.level) / self.rate

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

    All methods are coroutines so that, as a Ray async actor, they run on its
    event loop. ``holder`` names one caller (a :class:`ClusterLimiter`); any
    call renews that holder's lease. Grants are first come, first served.
    """

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        max_concurrency: int | None = None,
        lease_ttl: float = LEASE_TTL,
        name: str = "",
    ):
        self.name = name
        self.limits = {"rpm": rpm, "tpm": tpm, "max_concurrency": max_concurrency}
        # A fresh limiter starts as if it had just been busy, from its first request on: no opening
        # burst of requests however late the first caller comes (and none after a restart).
        # A bucket of tokens may start full: it is coarse anyway.
        self._requests = _Bucket(rpm * (1.0 - RPM_HEADROOM), REQUEST_BURST, 1.0) if rpm else None
        # and, whatever the bucket holds (after a stall of this process, say), never more than the
        # limit's share of requests in any 1-second window
        self._per_second = math.ceil(rpm / 60.0 - 1e-9) if rpm else 0
        self._recent: deque[tuple[float, int]] = deque()  # (when, how many) granted in the last second
        self._recent_count = 0
        self._tokens = _Bucket(tpm, TOKEN_BURST) if tpm else None
        self._max_slots = max_concurrency
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
    ) -> dict[str, Any]:
        """Wait until at least one request may start; grant up to ``want`` of them.

        ``tokens_each``: the estimate reserved per request. ``idle_slots``: slots
        the holder already has and will use for the first of these requests.
        ``token_correction``: as in :meth:`release`, for requests already over.
        Returns ``{"granted": n, "slots": new_slots, "pause": 0.0, "contended": bool, "share": int | None}``;
        ``contended`` says other holders are waiting, ``share`` is a fair number
        of slots per holder.
        """
        now = time.monotonic()
        self._touch(holder, now)
        self._correct(token_correction, now)
        future = asyncio.get_running_loop().create_future()
        self._queue.append(_Ask(holder, max(1, int(want)), max(0, int(tokens_each)), max(0, int(idle_slots)), future))
        self._kick()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted as the caller went away: take the slots back
                await self.release(holder, future.result()["slots"], 0)
            self._kick()  # the dispatcher may be waiting for this ask
            raise

    async def release(self, holder: str, slots: int = 0, token_correction: int = 0) -> None:
        """Give back ``slots`` and correct the token count by ``token_correction``
        (reported usage minus estimate: more debit when positive, a refund when negative)."""
        now = time.monotonic()
        lease = self._leases.get(holder)
        if lease is not None:
            lease.expires = now + self._ttl
            back = min(max(0, int(slots)), lease.slots)  # slots already taken back stay taken
            lease.slots -= back
            self._in_flight -= back
        self._correct(token_correction, now)
        self._kick()

    def _correct(self, token_correction: int, now: float) -> None:
        if self._tokens is not None and token_correction:
            self._tokens.refill(now)
            # a refund gives back what was reserved, even above the capacity: it was taken from there
            self._tokens.level -= token_correction

    async def backoff(self, holder: str, seconds: float) -> None:
        """The endpoint said "too many requests": grant nothing on this connector for ``seconds``."""
        now = time.monotonic()
        self._touch(holder, now)
        until = now + max(0.0, float(seconds))
        if until > self._paused_until:
            self._paused_until = until
            for bucket in (self._requests, self._tokens):
                if bucket is not None:
                    bucket.refill(now)
                    bucket.hold(until)
        self._kick()

    async def sync(self, holder: str, held: int = 0) -> dict[str, Any]:
        """Renew ``holder``'s lease; it says it holds ``held`` slots.

        The limiter's count of a holder's slots is never below the holder's own
        (grants are counted here first, returns there first), unless the limiter
        lost count: it was restarted, or the lease ran out while the holder was
        merely slow. Then what the holder says it holds is counted again.
        """
        now = time.monotonic()
        lease = self._touch(holder, now)
        if self._max_slots and held > lease.slots:
            self._in_flight += int(held) - lease.slots
            lease.slots = int(held)
        return {"pause": max(0.0, self._paused_until - now), "contended": self._contended(holder), "share": self._share()}

    async def stats(self) -> dict[str, Any]:
        """Counters for tests and benchmarks."""
        now = time.monotonic()
        self._reap(now)
        paused = max(0.0, self._paused_until - now)
        return {
            "limits": dict(self.limits),
            "granted": self._granted,
            "in_flight": self._in_flight,
            "paused_until": time.time() + paused if paused else 0.0,
            "paused_for": paused,
            "waiting": sum(1 for ask in self._queue if not ask.future.done()),
            "holders": len(self._leases),
            "reclaimed": self._reclaimed,
            "pid": os.getpid(),
        }

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
            now = time.monotonic()
            self._reap(now)
            n, wait = self._plan(head, now)
            if n:
                self._queue.popleft()
                head.future.set_result(self._grant(head, n, now))
                continue
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=wait)
            except asyncio.TimeoutError:
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
            wait = max(wait, bucket.wait(target))
            n = min(n, max(1, int(bucket.level + 1e-9)))
            while self._recent and self._recent[0][0] <= now - 1.0:
                self._recent_count -= self._recent.popleft()[1]
            room = self._per_second - self._recent_count
            if room < 1:
                wait = max(wait, self._recent[0][0] + 1.0 - now)
            n = min(n, max(1, room))
        if self._tokens is not None:
            bucket = self._tokens
            bucket.refill(now)
            each = max(1, ask.tokens_each)
            wait = max(wait, bucket.wait(each))
            n = min(n, max(1, int(bucket.level // each)))
        if self._max_slots is not None:
            lease = self._leases.get(ask.holder)
            idle = min(ask.idle_slots, lease.slots if lease else 0)
            free = idle + max(0, self._max_slots - self._in_flight)
            if free < 1:
                return 0, self._next_expiry(now)
            n = min(n, free)
        if wait > 0:
            return 0, wait
        return n, None

    def _grant(self, ask: _Ask, n: int, now: float) -> dict[str, Any]:
        if self._requests is not None:
            self._requests.level -= n
            self._recent.append((now, n))
            self._recent_count += n
        if self._tokens is not None:
            self._tokens.level -= n * ask.tokens_each
        lease = self._touch(ask.holder, now)
        new = 0
        if self._max_slots is not None:
            new = max(0, n - min(ask.idle_slots, lease.slots))
            lease.slots += new
            self._in_flight += new
        self._granted += n
        return {"granted": n, "slots": new, "pause": 0.0, "contended": self._contended(ask.holder), "share": self._share()}

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
        return max(1, self._max_slots // max(1, len(active)))


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=ACTOR_CONCURRENCY)
class ConnectorLimiter(LimiterCore):
    """The cluster-wide limiter of one connector: :class:`LimiterCore` as a named, restartable Ray actor.

    A restart forgets the counts; the processes that hold slots report them
    again at their next sync, and the buckets start without a burst.
    """


# -- the per-process client ------------------------------------------------


class LimiterRemote(Protocol):
    """How a :class:`ClusterLimiter` reaches its connector's limiter (a Ray actor, or a :class:`LimiterCore` in tests)."""

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> dict[str, Any]: ...

    def release(self, holder: str, slots: int, token_correction: int) -> None: ...

    def backoff(self, holder: str, seconds: float) -> None: ...

    async def sync(self, holder: str, held: int) -> dict[str, Any]: ...


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

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> dict[str, Any]:
        handle = await self.handle()
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

    async def sync(self, holder: str, held: int) -> dict[str, Any]:
        handle = await self.handle()
        return await handle.sync.remote(holder, held)


class CoreRemote:
    """A :class:`LimiterCore` in this process's event loop: for tests without Ray."""

    def __init__(self, core: LimiterCore):
        self.core = core
        self._tasks: set[asyncio.Task] = set()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def acquire(self, holder: str, want: int, tokens_each: int, idle_slots: int, token_correction: int) -> dict[str, Any]:
        return await self.core.acquire(holder, want, tokens_each, idle_slots, token_correction)

    def release(self, holder: str, slots: int, token_correction: int) -> None:
        self._spawn(self.core.release(holder, slots, token_correction))

    def backoff(self, holder: str, seconds: float) -> None:
        self._spawn(self.core.backoff(holder, seconds))

    async def sync(self, holder: str, held: int) -> dict[str, Any]:
        return await self.core.sync(holder, held)


@dataclass
class _Waiter:
    tokens: int
    future: asyncio.Future


_holder_ids = itertools.count()


class ClusterLimiter:
    """The :class:`~farm.agents.limiter.Limiter` of one connector in one process, backed by its cluster-wide actor.

    Share one instance among all the clients of the process (``limiter_factory``
    does). It belongs to the event loop that first uses it.
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
    ):
        self.connector = connector
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
            self._drop_permits(time.monotonic(), everything=True)
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
        if not self._waiters and self._ready(time.monotonic()):
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
        now = time.monotonic()
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
        self._serve(time.monotonic())
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
                except ActorDiedError as exc:
                    raise LimiterUnavailable(
                        f"Cannot start a request on connector '{self.connector}': its rate limiter is gone ({type(exc).__name__})."
                    ) from None
                except RayActorError:  # restarting: ask the new one
                    self._correction += correction
                    await asyncio.sleep(0.2)
                    continue
                except BaseException:
                    self._correction += correction
                    raise
                finally:
                    self._declared = 0
                    self._stuck = False
                now = time.monotonic()
                self._slots += int(grant.get("slots") or 0)
                if self._rated:
                    self._permits.extend([(now, each)] * int(grant["granted"]))
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

    def _learn(self, answer: dict[str, Any], now: float) -> None:
        pause = float(answer.get("pause") or 0.0)
        if pause > 0:
            self._paused_until = max(self._paused_until, now + pause)
            self._drop_permits(now, everything=True)
        self._contended = bool(answer.get("contended"))
        self._share = answer.get("share")

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
                now = time.monotonic()
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
                        self._learn(await self._remote.sync(self.holder, self._slots), time.monotonic())
                    except (RayActorError, LimiterUnavailable):
                        pass  # the actor is restarting; the next round tries again
                    if self._waiters:
                        self._pump()
        finally:
            self._keeper = None

    def __repr__(self) -> str:
        return f"ClusterLimiter({self.connector!r}, slots={self._slots}, busy={self._busy}, waiting={len(self._waiters)})"


# -- what the driver and the actors call -------------------------------------


def limiter_name(scope: str, connector: str) -> str:
    """The Ray name of a connector's limiter actor in one run."""
    return f"farm-limiter:{scope}:{connector}"


def _limits_of(connector: Connector) -> dict[str, int] | None:
    limits = {k: v for k, v in (("rpm", connector.rpm), ("tpm", connector.tpm), ("max_concurrency", connector.max_concurrency)) if v}
    return limits or None


def start_limiters(
    config: FarmConfig,
    connector_names: list[str],
    scope: str,
    *,
    lease_ttl: float = LEASE_TTL,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Start (or find) the limiter actor of each named connector that has rpm, tpm or max_concurrency.

    Returns ``(handles, limits)``. Keep ``handles`` for the whole run: a named
    actor without a handle is garbage-collected. Pass ``limits`` (small and
    picklable) to every actor that calls connectors; its shape::

        {"scope": scope, "namespace": "<ray namespace>", "lease_ttl": 30.0,
         "connectors": {"<name>": {"rpm": 600, "tpm": 150000, "max_concurrency": 64}}}

    Only limited connectors are listed (with the limits they have).
    """
    handles: dict[str, Any] = {}
    connectors: dict[str, dict[str, int]] = {}
    for name in dict.fromkeys(connector_names):
        limits = _limits_of(config.connector(name))
        if limits is None:
            continue
        actor_name = limiter_name(scope, name)
        handles[name] = ConnectorLimiter.options(name=actor_name, get_if_exists=True).remote(
            limits.get("rpm"), limits.get("tpm"), limits.get("max_concurrency"), lease_ttl, actor_name
        )
        connectors[name] = limits
    namespace = ray.get_runtime_context().namespace if ray.is_initialized() else None
    return handles, {"scope": scope, "namespace": namespace, "lease_ttl": lease_ttl, "connectors": connectors}


def limiter_factory(config: FarmConfig, limits: dict[str, Any] | None) -> Callable[[str], Limiter] | None:
    """``limiter_for(connector_name)`` for an actor's clients, from the ``limits`` the driver passed down.

    One :class:`ClusterLimiter` per connector for the whole process (made on
    first use, its actor looked up on its first request); :class:`NoLimit` for
    a connector without limits. None when ``limits`` is None (no limiters).
    """
    if limits is None:
        return None
    scope = limits["scope"]
    namespace = limits.get("namespace")
    ttl = float(limits.get("lease_ttl") or LEASE_TTL)
    listed = limits.get("connectors") or {}
    if not isinstance(listed, dict):  # a plain list of names: their limits come from the config
        listed = {name: _limits_of(config.connector(name)) for name in listed}
    limited: dict[str, dict[str, int]] = {name: spec for name, spec in listed.items() if spec}
    made: dict[str, Limiter] = {}

    def limiter_for(connector_name: str) -> Limiter:
        if connector_name not in limited:
            return NoLimit()
        if connector_name not in made:
            spec = limited[connector_name]
            made[connector_name] = ClusterLimiter(
                connector_name,
                ActorRemote(limiter_name(scope, connector_name), namespace),
                rpm=spec.get("rpm"),
                tpm=spec.get("tpm"),
                max_concurrency=spec.get("max_concurrency"),
                lease_ttl=ttl,
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
