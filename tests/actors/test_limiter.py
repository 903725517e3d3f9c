"""The cluster-wide connector limiter: rpm, tpm, concurrency, Retry-After pauses and leases.

These run the real actors on the session's local Ray, with callers in two
actors and in this process, and count what was granted when (the bookkeeping
alone is tested in tests/farm/test_ratelimit.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import uuid
from typing import Any

import pytest
import ray
from farm.actors.limiter import LimiterPlan, limiter_factory, limiter_name, start_limiters
from ray.exceptions import RayActorError

from farm.agents.openai import OpenAIAgent
from farm.agents.permits import Limiter, NoLimit
from farm.config import AgentConfig, Connector, FarmConfig
from farm.demo.server import JSONServer, Response, chat_completion
from farm.ratelimit import PermitClient
from farm.ratelimit.client import BATCH
from farm.ratelimit.core import default_burst
from tests.farm.test_ratelimit import busiest, hammer

# -- the real actors ----------------------------------------------------------


@ray.remote(num_cpus=0)
class Caller:
    """Plays a session actor: its clients reach a connector's limiter through ``limiter_factory``."""

    def __init__(self) -> None:
        self.factories: dict[str, Any] = {}

    def limiter_for(self, limits: LimiterPlan, connector: str) -> Limiter:
        if limits.scope not in self.factories:  # one factory per run, as in a session actor
            self.factories[limits.scope] = limiter_factory(limits)
        return self.factories[limits.scope](connector)

    async def pid(self) -> int:
        return os.getpid()

    async def hammer(self, limits: LimiterPlan, connector: str, callers: int, start_at: float, stop_at: float, hold: float) -> list[float]:
        return await hammer(self.limiter_for(limits, connector), callers, start_at, stop_at, hold)

    async def chat(self, limits: LimiterPlan, connector: Connector, callers: int, requests: int) -> int:
        """``callers`` conversations sending ``requests`` completions in all, through OpenAIAgent."""
        agent = OpenAIAgent(connector, AgentConfig(id="probe"), limiter=self.limiter_for(limits, connector.name))
        left = requests

        async def one() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                await agent.send([{"role": "user", "content": "hi"}], {})

        await asyncio.gather(*(one() for _ in range(callers)))
        await agent.aclose()
        return requests

    async def keep_acquiring(self, limits: LimiterPlan, connector: str, callers: int) -> None:
        """``callers`` loops of acquire, hold, release until :meth:`stop`; :meth:`granted` counts the grants."""
        limiter = self.limiter_for(limits, connector)
        self.stopping = asyncio.Event()
        self.grants = 0

        async def one() -> None:
            while not self.stopping.is_set():
                await limiter.acquire(0)
                self.grants += 1
                await asyncio.sleep(0.01)
                limiter.release(0)

        await asyncio.gather(*(one() for _ in range(callers)))

    async def granted(self) -> int:
        return getattr(self, "grants", 0)

    async def stop(self) -> None:
        self.stopping.set()

    async def take(self, limits: LimiterPlan, connector: str, n: int) -> None:
        """Start ``n`` requests and never finish them."""
        limiter = self.limiter_for(limits, connector)
        for _ in range(n):
            await limiter.acquire(0)


def spawn(n: int) -> list[Any]:
    actors = [Caller.options(max_concurrency=1000).remote() for _ in range(n)]
    ray.get([a.pid.remote() for a in actors])
    return actors


@pytest.fixture(scope="module")
def callers(ray_session):
    """Two caller actors for the module's tests."""
    actors = spawn(2)
    yield actors
    for actor in actors:
        ray.kill(actor, no_restart=True)


@pytest.fixture
def limiters(ray_session):
    """``start(connectors, lease_ttl=...) -> limits``; the actors started are killed after the test."""
    started: list[Any] = []

    def start(connectors: dict[str, dict[str, Any]], **options: Any) -> dict[str, Any]:
        config = FarmConfig(connectors={n: Connector(base_url="http://127.0.0.1:9", **c) for n, c in connectors.items()})
        handles, limits = start_limiters(config, list(connectors), f"test-{uuid.uuid4().hex[:8]}", **options)
        started.extend(handles.values())
        ray.get([h.stats.remote() for h in handles.values()])  # running before the clock starts
        return limits

    yield start
    for handle in started:
        ray.kill(handle, no_restart=True)


def test_rpm_holds_over_every_second_for_callers_in_two_actors_and_the_driver(limiters, callers):
    limits = limiters({"llm": {"rpm": 600}})
    start = time.time() + 0.3
    stop = start + 3.0
    refs = [a.hammer.remote(limits, "llm", 10, start, stop, 0.005) for a in callers]
    here = asyncio.run(hammer(limiter_factory(limits)("llm"), 10, start, stop, 0.005))
    stamps = sorted(here + [s for r in ray.get(refs) for s in r])

    settled = [s for s in stamps if s >= start + 1.0]
    # 10/s, paced; a window may catch one more at its edge. A grant is stamped by its caller when the
    # caller's process gets its turn: on a loaded machine up to ~0.2 s late, which can put 12 or 13
    # stamps of a steady 10/s in one second. In 0.8 s a steady 10/s puts 9 (+1 at the edge, +1 for a
    # stamp that late); a burst shows as more, a rate above 10/s in the count of the two seconds.
    assert busiest(settled, 0.8) <= 11
    assert busiest(stamps, 1.0) <= 21  # the opening burst (10) and the second's pacing
    assert 17 <= len(settled) <= 22  # 2 s × 10/s (+1 at the window's edge; a caller that stalls takes fewer)
    assert len(here) > 0 and all(len(r) > 0 for r in ray.get(refs))  # every process got its turn


def test_tpm_reserves_the_estimate_and_corrects_it_with_the_usage(limiters, ray_session):
    limits = limiters({"refund": {"tpm": 6000}, "debit": {"tpm": 6000}})  # 100 tokens/s, 100 at once
    limiter_for = limiter_factory(limits)

    async def both() -> tuple[list[float], list[float]]:
        start = time.time()
        return await asyncio.gather(
            hammer(limiter_for("refund"), 8, start, start + 2.0, 0.005, tokens=50, used=10),
            hammer(limiter_for("debit"), 8, start, start + 2.0, 0.005, tokens=50, used=100),
        )

    refunded, debited = asyncio.run(both())
    # (100 at once + 2 s × 100/s) / cost: at most 30 requests at 10 tokens (6 if the estimate of 50
    # stood; refunds arrive up to 0.1 s late, so ~22 in 2 s, fewer when they are later), 3 at 100
    assert 10 <= len(refunded) <= 32
    assert 2 <= len(debited) <= 5


def test_concurrency_is_never_exceeded_at_the_server(limiters, callers):
    limits = limiters({"llm": {"max_concurrency": 5}})
    lock = threading.Lock()
    seen = {"now": 0, "peak": 0, "total": 0}

    def handler(path: str, body: Any, headers: dict[str, str]) -> Response:
        with lock:
            seen["now"] += 1
            seen["total"] += 1
            seen["peak"] = max(seen["peak"], seen["now"])
        time.sleep(0.02)
        with lock:
            seen["now"] -= 1
        return Response(chat_completion("ok"))

    with JSONServer(handler) as server:
        connector = Connector(name="llm", base_url=server.url, max_concurrency=5)
        ray.get([a.chat.remote(limits, connector, 10, 60) for a in callers])

    assert seen["total"] == 120
    assert seen["peak"] <= 5
    assert seen["peak"] >= 4  # and the slots are used


@pytest.mark.parametrize("limits_of", [{"max_concurrency": 8}, {"rpm": 6000}], ids=["held-slots", "rate"])
def test_backoff_pauses_every_holder(limiters, callers, limits_of):
    limits = limiters({"llm": limits_of})
    start = time.time() + 0.2
    # the holders go on long enough to resume even when the word of the backoff reaches the limiter
    # as late as this test waits for it (0.7 + 2.0 s after the start, on a loaded machine)
    stop = start + 4.5
    refs = [a.hammer.remote(limits, "llm", 10, start, stop, 0.01) for a in callers]

    time.sleep(max(0.0, start + 0.7 - time.time()))
    limiter_factory(limits)("llm").backoff(1.0)  # a 429 seen by a third process (fire and forget)
    actor = ray.get_actor(limiter_name(limits.scope, "llm"))
    deadline = time.time() + 2.0
    while not (paused_until := ray.get(actor.stats.remote())["paused_until"]) and time.time() < deadline:
        time.sleep(0.01)
    paused_at = paused_until - 1.0  # when the limiter itself paused (the message may travel slowly under load)
    per_holder = [sorted(r) for r in ray.get(refs)]
    stamps = [s for r in per_holder for s in r]

    assert paused_until, "the limiter never heard of the backoff"
    assert any(s < paused_at for s in stamps)
    # every holder pauses: its grants, some 10 a second before, stop for most of the 1 s pause (a holder
    # that never heard of it would go on at its rhythm); however slowly the word travels, within half of it
    for grants in per_holder:
        after = [s for s in grants if s >= paused_at]
        assert after and after[-1] >= paused_at + 1.0, grants  # and it resumes
        assert max(b - a for a, b in zip([paused_at, *after], after, strict=False)) >= 0.5, grants


def test_a_dead_holders_slots_come_back_after_the_lease(limiters, ray_session):
    limits = limiters({"llm": {"max_concurrency": 2}}, lease_ttl=2.0)
    (holder,) = spawn(1)
    ray.get(holder.take.remote(limits, "llm", 2))
    mine = limiter_factory(limits)("llm")

    async def acquire_within(seconds: float) -> bool:
        try:
            await asyncio.wait_for(mine.acquire(0), timeout=seconds)
        except TimeoutError:
            return False
        return True

    async def scenario() -> bool:
        blocked = not await acquire_within(3.0)  # a live holder keeps its lease past its 2 s
        os.kill(ray.get(holder.pid.remote()), signal.SIGKILL)
        assert await acquire_within(20.0)  # (a bound on waiting, for a loaded machine)
        mine.release(0)
        return blocked

    blocked = asyncio.run(scenario())
    stats = ray.get(ray.get_actor(limiter_name(limits.scope, "llm")).stats.remote())
    assert blocked
    assert stats["reclaimed"] == 2  # the dead holder's two slots came back by its lapsed lease


def wait_for(condition: Any, what: str, seconds: float = 60.0) -> Any:
    """Poll ``condition`` until it returns something true (a bound on waiting, not a timing under test)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if found := condition():
                return found
        except RayActorError:  # the actor is restarting
            pass
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting {seconds:.0f} s for {what}")


def restart(actor: Any) -> None:
    """SIGKILL the limiter actor and wait until its replacement answers."""
    old = ray.get(actor.stats.remote())["pid"]
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: ray.get(actor.stats.remote())["pid"] != old, "the limiter to restart")


def test_a_restarted_limiter_lets_the_run_go_on(limiters, callers):
    limits = limiters({"llm": {"rpm": 1200, "max_concurrency": 4}})
    actor = ray.get_actor(limiter_name(limits.scope, "llm"))
    refs = [a.keep_acquiring.remote(limits, "llm", 5) for a in callers]
    wait_for(lambda: all(ray.get([a.granted.remote() for a in callers])), "every caller's first grant")

    restart(actor)  # while the callers keep asking
    before = ray.get([a.granted.remote() for a in callers])
    # the new limiter grants, and the callers get them (more than a batch each, so not their stock)
    wait_for(lambda: ray.get(actor.stats.remote())["granted"] >= 2 * BATCH, "grants from the new limiter")
    wait_for(lambda: all(now > then for now, then in zip(ray.get([a.granted.remote() for a in callers]), before, strict=True)), "grants to every caller")
    for a in callers:
        a.stop.remote()
    ray.get(refs)  # no caller saw an error


def test_a_restarted_limiter_starts_with_no_burst(limiters):
    """The lost limiter may have just granted its burst: its replacement grants one at a time at
    first, however long it took to come back (the pacing itself: tests/farm/test_ratelimit.py)."""
    limits = limiters({"llm": {"rpm": 1200}})  # a burst of 20
    actor = ray.get_actor(limiter_name(limits.scope, "llm"))
    burst = limits.connectors["llm"].burst or default_burst(1200)
    assert ray.get(actor.acquire.remote("probe", burst)).granted == burst  # a new limiter grants its burst at once

    restart(actor)
    assert ray.get(actor.acquire.remote("probe", burst)).granted < burst


def test_only_limited_connectors_get_a_limiter(limiters):
    limits = limiters({"open": {}, "llm": {"rpm": 60}})
    assert list(limits.connectors) == ["llm"]
    assert ray.get_actor(limiter_name(limits.scope, "llm"))
    with pytest.raises(ValueError):
        ray.get_actor(limiter_name(limits.scope, "open"))

    limiter_for = limiter_factory(limits)
    assert isinstance(limiter_for("open"), NoLimit)
    assert isinstance(limiter_for("llm"), PermitClient)
    assert limiter_for("llm") is limiter_for("llm")  # one per connector per process
    assert limiter_factory(None) is None
