"""Connector limits without Ray: the core's bookkeeping on a fake clock, and a core with its
per-process clients in one event loop (as the local engine runs them) on virtual time."""

from __future__ import annotations

import asyncio
import math
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from farm.agents.permits import Limiter, NoLimit
from farm.config import Connector, FarmConfig
from farm.ratelimit import LimiterCore, PermitClient, default_parallel, limits_of, local_limiters
from farm.ratelimit.client import CoreRemote

T = TypeVar("T")


async def hammer(
    limiter: Limiter,
    callers: int,
    start_at: float,
    stop_at: float,
    hold: float,
    tokens: int = 0,
    used: int = 0,
    clock: Callable[[], float] = time.time,
) -> list[float]:
    """``callers`` loops of acquire, hold, release between two times of ``clock``; the grant times."""
    await asyncio.sleep(max(0.0, start_at - clock()))
    stamps: list[float] = []

    async def one() -> None:
        while clock() < stop_at:
            try:
                await asyncio.wait_for(limiter.acquire(tokens), timeout=max(0.001, stop_at - clock()))
            except TimeoutError:
                return
            stamps.append(clock())
            await asyncio.sleep(hold)
            limiter.release(used)

    await asyncio.gather(*(one() for _ in range(callers)))
    return stamps


class _JumpingSelector(selectors.DefaultSelector):
    """Polls instead of blocking, and moves the clock on by the time it would have blocked."""

    def __init__(self, advance: Callable[[float], None]):
        super().__init__()
        self._advance = advance

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is not None and timeout > 0:
            self._advance(timeout)
            timeout = 0
        return super().select(timeout)


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: when nothing is ready, its clock jumps to the next timer.

    Seconds of limiter traffic (sleeps, ``wait_for`` timeouts, leases, pacing) then run in
    milliseconds and come out the same on a busy machine as on an idle one; the limiter's
    own ``clock`` is this loop's :meth:`time`. Only for code without real I/O or threads.
    """

    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_JumpingSelector(self._advance))

    def _advance(self, seconds: float) -> None:
        self._now += seconds

    def time(self) -> float:
        return self._now


def on_virtual_time(scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``scenario()`` to its end on a :class:`VirtualTimeLoop`."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(scenario())


def busiest(stamps: list[float], width: float) -> int:
    """The most grants in any window of ``width`` seconds (windows start at a grant)."""
    stamps = sorted(stamps)
    most, j = 0, 0
    for i, start in enumerate(stamps):
        while j < len(stamps) and stamps[j] < start + width:
            j += 1
        most = max(most, j - i)
    return most


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_virtual_time_runs_long_waits_at_once_and_in_order():
    async def scenario() -> tuple[list[str], float]:
        order: list[str] = []

        async def after(seconds: float, name: str) -> None:
            await asyncio.sleep(seconds)
            order.append(name)

        await asyncio.gather(after(30.0, "late"), after(10.0, "early"), after(20.0, "middle"))
        return order, asyncio.get_running_loop().time()

    started = time.monotonic()
    assert on_virtual_time(scenario) == (["early", "middle", "late"], 30.0)
    assert time.monotonic() - started < 5.0  # not the 30 s it says


def test_the_request_bucket_paces_requests_on_the_fake_clock():
    async def scenario() -> list[int]:
        clock = FakeClock()
        core = LimiterCore(rpm=60, clock=clock)  # one a second
        seen: list[int] = []
        first = await core.acquire("a", want=5)
        seen.append(first.granted)
        waiting = asyncio.ensure_future(core.acquire("a", want=5))
        await settle()
        seen.append(int(waiting.done()))
        clock.now += 1.1  # a second later (paced 2 % under the rpm), one more request is due
        core.wake()
        await settle()
        seen.append(waiting.result().granted)
        return seen

    # a fresh limiter opens with a single permit (no burst), then paces at the rate
    assert asyncio.run(scenario()) == [1, 0, 1]


def test_a_pause_grants_nothing_until_it_ends():
    async def scenario() -> tuple[bool, bool]:
        clock = FakeClock()
        core = LimiterCore(max_concurrency=4, clock=clock)
        await core.backoff("a", 30.0)
        waiting = asyncio.ensure_future(core.acquire("a"))
        await settle()
        during = waiting.done()
        clock.now += 30.0
        core.wake()
        await settle()
        return during, waiting.done()

    assert asyncio.run(scenario()) == (False, True)


def test_a_silent_holders_slots_come_back_after_its_lease():
    async def scenario() -> dict[str, Any]:
        clock = FakeClock()
        core = LimiterCore(max_concurrency=2, lease_ttl=5, clock=clock)
        assert (await core.acquire("dead", want=2)).slots == 2
        waiting = asyncio.ensure_future(core.acquire("alive"))
        await settle()
        before = waiting.done()
        clock.now += 5.0
        core.wake()
        await settle()
        return {"before": before, "after": waiting.done(), "stats": await core.stats()}

    got = asyncio.run(scenario())
    assert not got["before"] and got["after"]
    assert got["stats"]["reclaimed"] == 2


def test_local_limiters_give_one_client_per_limited_connector():
    config = FarmConfig(connectors={"open": Connector(base_url="http://x"), "llm": Connector(base_url="http://x", rpm=60)})
    limiter_for = local_limiters(config)
    assert isinstance(limiter_for("open"), NoLimit)
    assert isinstance(limiter_for("llm"), PermitClient)
    assert limiter_for("llm") is limiter_for("llm")


def test_slots_are_shared_fairly_between_a_busy_and_a_quiet_process():
    async def scenario() -> dict[str, int]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(max_concurrency=4, lease_ttl=2, clock=clock)
        busy = PermitClient("c", CoreRemote(core), max_concurrency=4, lease_ttl=2, clock=clock)
        quiet = PermitClient("c", CoreRemote(core), max_concurrency=4, lease_ttl=2, clock=clock)
        start, stop = clock(), clock() + 1.5
        a, b = await asyncio.gather(
            hammer(busy, 40, start, stop, 0.01, clock=clock), hammer(quiet, 2, start, stop, 0.01, clock=clock)
        )
        return {"busy": len(a), "quiet": len(b)}

    counts = on_virtual_time(scenario)
    # two slots each once both ask: the quiet process is not starved by the busy one
    assert counts["quiet"] > 0.6 * counts["busy"]


def test_rate_concurrency_and_tokens_together():
    async def scenario() -> tuple[list[float], int]:
        clock = asyncio.get_running_loop().time
        limits = dict(rpm=1200, tpm=600_000, max_concurrency=3)
        core = LimiterCore(**limits, lease_ttl=2, clock=clock)
        clients = [PermitClient("c", CoreRemote(core), **limits, lease_ttl=2, clock=clock) for _ in range(3)]
        peak = current = 0

        class Counting:
            def __init__(self, inner: PermitClient):
                self.inner = inner

            async def acquire(self, tokens: int) -> None:
                nonlocal peak, current
                await self.inner.acquire(tokens)
                current += 1
                peak = max(peak, current)

            def release(self, tokens_used: int) -> None:
                nonlocal current
                current -= 1
                self.inner.release(tokens_used)

            def backoff(self, seconds: float) -> None:
                self.inner.backoff(seconds)

        start, stop = clock(), clock() + 1.5
        runs = await asyncio.gather(
            *(hammer(Counting(c), 10, start, stop, 0.2, tokens=100, used=50, clock=clock) for c in clients)
        )
        return [s for run in runs for s in run], peak

    stamps, peak = on_virtual_time(scenario)
    assert peak <= 3
    assert 12 <= len(stamps) <= 24  # 3 slots × 0.2 s: 8 rounds of 3 in 1.5 s, under the 20/s of the rpm


def test_clients_keep_to_the_rpm_in_every_second_after_the_opening_burst():
    async def scenario() -> list[float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(rpm=600, clock=clock)
        clients = [PermitClient("c", CoreRemote(core), rpm=600, clock=clock) for _ in range(2)]
        start = clock()
        runs = await asyncio.gather(*(hammer(c, 10, start, start + 3.0, 0.005, clock=clock) for c in clients))
        return [s for run in runs for s in run]

    stamps = on_virtual_time(scenario)
    assert busiest([s for s in stamps if s > stamps[0]], 1.0) <= 10  # 10/s, shared by both processes
    assert busiest(stamps, 1.0) <= 20  # the burst of 10 and the second's pacing
    assert 37 <= len(stamps) <= 40  # and no fewer: the rate is used


def test_a_backoff_stops_every_client_until_the_pause_ends():
    async def scenario() -> tuple[float, float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(max_concurrency=2, clock=clock)
        told = PermitClient("c", CoreRemote(core), max_concurrency=2, clock=clock)
        other = PermitClient("c", CoreRemote(core), max_concurrency=2, clock=clock)
        await told.acquire(0)
        told.release(0)
        started = clock()
        told.backoff(5.0)
        await asyncio.sleep(0)
        await other.acquire(0)
        return started, clock()

    started, granted = on_virtual_time(scenario)
    assert 5.0 <= granted - started < 5.5


def test_default_parallel_follows_the_connector_limits():
    def conn(**limits: Any) -> Connector:
        return Connector(base_url="http://x", **limits)

    assert default_parallel(conn(max_concurrency=16, rpm=6000)) == 16
    assert default_parallel(conn(rpm=600)) == 40  # 10/s for 4 s calls
    assert default_parallel(conn(rpm=10_000_000)) == 512
    assert default_parallel(conn(tpm=1000)) == 128
    assert default_parallel(conn()) == 128


def test_429s_halve_the_concurrency_and_calm_grows_it_back():
    async def scenario() -> list[int | None]:
        clock = FakeClock()
        core = LimiterCore(max_concurrency=8, clock=clock)
        caps = []
        await core.backoff("a", 1.0)
        await core.backoff("a", 1.0)  # 429s of the same pause count once
        caps.append((await core.stats())["cap"])
        clock.now += 1.0
        await core.backoff("a", 1.0)
        caps.append((await core.stats())["cap"])
        clock.now += 1.0
        core.wake()
        grant = await core.acquire("a", want=8)
        caps.append(grant.slots)  # no more than the lowered cap at once
        for _ in range(40):  # requests that end without a 429 grow it back, one slot per cap of them
            await core.release("a", 1)
            await core.acquire("a")
        caps.append((await core.stats())["cap"])
        return caps

    assert asyncio.run(scenario()) == [4, 2, 2, 8]


def test_a_small_suite_goes_at_once_then_at_the_rpm_pace():
    """rpm 500: ten instant calls at once. A burst of 8 (rpm/60) goes at once, then one every
    122 ms (the rpm, 2 % under): the tenth does not wait for the next second."""

    async def scenario() -> list[float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(rpm=500, clock=clock)
        start = clock()

        async def one(i: int) -> float:
            await core.acquire(f"h{i}")
            return clock() - start

        return list(await asyncio.gather(*(one(i) for i in range(10))))

    times = sorted(on_virtual_time(scenario))
    assert times[:8] == [0.0] * 8
    assert 0.12 < times[8] < 0.13 and 0.24 < times[9] < 0.25


@pytest.mark.parametrize("rpm, burst", [(120, None), (600, None), (120, 30), (61, None)])
def test_no_minute_holds_more_than_the_rpm_and_no_second_more_than_the_burst_and_its_share(rpm: int, burst: int | None):
    async def scenario() -> list[float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(rpm=rpm, clock=clock, burst=burst)
        clients = [PermitClient("c", CoreRemote(core), rpm=rpm, clock=clock) for _ in range(2)]
        start = clock()
        runs = []
        for pause in (0.0, 7.3):  # saturated, then idle (the bucket fills), then saturated again
            await asyncio.sleep(pause)
            runs += await asyncio.gather(*(hammer(c, 20, clock(), clock() + 65.0, 0.001, clock=clock) for c in clients))
        return [s - start for run in runs for s in run]

    stamps = on_virtual_time(scenario)
    second = LimiterCore(rpm=rpm, burst=burst).limits.burst + math.ceil(rpm / 60)
    assert busiest(stamps, 60.0) <= rpm
    assert busiest(stamps, 1.0) <= second
    assert len(stamps) >= 2 * 0.95 * rpm  # the rate is used


def test_after_a_burst_requests_are_paced_not_bunched_every_second():
    async def scenario() -> list[float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(rpm=600, clock=clock)
        client = PermitClient("c", CoreRemote(core), rpm=600, clock=clock)
        start = clock()
        return [s - start for s in await hammer(client, 30, start, start + 5.0, 0.001, clock=clock)]

    stamps = on_virtual_time(scenario)
    assert stamps.count(0.0) == 10  # the burst: a second's worth
    later = [s for s in stamps if s >= 1.0]
    assert busiest(later, 0.25) <= 4  # 10/s, evenly: not 10 at each second's start


def test_a_connectors_burst_reaches_its_limiter():
    config = FarmConfig(connectors={"llm": Connector(base_url="http://x", rpm=600, burst=3)})
    assert limits_of(config.connector("llm")).burst == 3
    assert LimiterCore(rpm=600, burst=3).limits.burst == 3
    assert LimiterCore(rpm=500).limits.burst == 8 and LimiterCore(rpm=30).limits.burst == 1


def test_a_core_that_replaces_a_lost_one_starts_with_no_burst():
    """The lost core may have just granted its burst: the new one paces from its first grant."""

    async def scenario(replacing: bool) -> list[float]:
        clock = asyncio.get_running_loop().time
        core = LimiterCore(rpm=600, clock=clock, replacing=replacing)
        start = clock()

        async def one(i: int) -> float:
            await core.acquire(f"h{i}")
            return clock() - start

        return sorted(await asyncio.gather(*(one(i) for i in range(3))))

    assert on_virtual_time(lambda: scenario(False)) == [0.0] * 3
    paced = on_virtual_time(lambda: scenario(True))
    assert 0.1 < paced[0] < 0.11 and 0.3 < paced[2] < 0.32
