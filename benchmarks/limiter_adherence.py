"""Limiter adherence: does a connector limited to ``--rpm`` get that rate, and never more?

    python benchmarks/limiter_adherence.py                 # rpm 600 for 60 s
    python benchmarks/limiter_adherence.py --seconds 20 --json-only

Many concurrent callers in ``--actors`` Ray actors (``--callers`` each) send
chat completions through :class:`farm.agents.openai.OpenAIAgent`, whose
limiter is the connector's cluster-wide :class:`farm.ratelimit.PermitClient`
(exactly as a session actor builds it), to a real local HTTP server
(:class:`farm.demo.server.JSONServer`) that answers after ``--latency``
seconds and notes when each request arrived. From those arrival times:

- the achieved rate over the run, in requests/minute and % of the limit;
- the busiest 1-second and 10-second windows (sliding: every window that
  starts at an arrival), against the limit scaled to the window;
- whether any window above the limit started after the first second.

A small table goes to stdout, then the same figures as one JSON line.
The run uses its own local Ray in a private temp folder (no dashboard).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from private_ray import private_ray_env  # noqa: E402  (beside this script)


def busiest(stamps: list[float], width: float, since: float = float("-inf")) -> int:
    """The most arrivals in a window ``[t, t + width)`` that starts at an arrival ``t >= since``."""
    stamps = sorted(stamps)
    most, j = 0, 0
    for i, start in enumerate(stamps):
        while j < len(stamps) and stamps[j] < start + width:
            j += 1
        if start >= since:
            most = max(most, j - i)
    return most


def windows_above(stamps: list[float], width: float, limit: float, since: float) -> int:
    """How many windows ``[t, t + width)`` starting at an arrival ``t >= since`` hold more than ``limit``."""
    stamps = sorted(stamps)
    above, j = 0, 0
    for i, start in enumerate(stamps):
        while j < len(stamps) and stamps[j] < start + width:
            j += 1
        if start >= since and j - i > limit:
            above += 1
    return above


def measure(arrivals: list[float], start: float, seconds: float, rpm: int) -> dict[str, Any]:
    """The figures of one run from the server's arrival times."""
    inside = sorted(t for t in arrivals if start <= t < start + seconds)
    per_second = rpm / 60.0
    first = inside[0] if inside else start
    settled = first + 1.0
    bins = [0] * int(seconds)
    for t in inside:
        bins[min(len(bins) - 1, int(t - start))] += 1
    gaps = [b - a for a, b in itertools.pairwise(inside)]
    busiest_1s = busiest(inside, 1.0)
    busiest_10s = busiest(inside, 10.0) if seconds >= 10 else None
    achieved = len(inside) / seconds * 60.0
    return {
        "requests": len(inside),
        "seconds": seconds,
        "rpm_limit": rpm,
        "achieved_rpm": round(achieved, 1),
        "achieved_pct": round(100.0 * achieved / rpm, 1),
        "busiest_1s": busiest_1s,
        "limit_1s": per_second,
        "busiest_1s_after_first_second": busiest(inside, 1.0, since=settled),
        "busiest_10s": busiest_10s,
        "limit_10s": per_second * 10 if seconds >= 10 else None,
        "windows_1s_above_limit_after_first_second": windows_above(inside, 1.0, per_second, settled),
        "windows_10s_above_limit_after_first_second": windows_above(inside, 10.0, per_second * 10, settled) if seconds >= 10 else None,
        "per_second_min": min(bins) if bins else 0,
        "per_second_max": max(bins) if bins else 0,
        "min_gap_ms": round(1000 * min(gaps), 1) if gaps else None,
        "median_gap_ms": round(1000 * statistics.median(gaps), 1) if gaps else None,
    }


def run(seconds: float, rpm: int, actors: int, callers: int, latency: float) -> dict[str, Any]:
    import ray
    from farm.actors.limiter import limiter_name, start_limiters

    from farm.config import Connector, FarmConfig
    from farm.demo.server import JSONServer, Response, chat_completion

    arrivals: list[float] = []
    lock = threading.Lock()
    body = chat_completion("ok")

    def handler(path: str, payload: Any, headers: dict[str, str]) -> Response:
        now = time.time()
        with lock:
            arrivals.append(now)
        return Response(body, delay=latency)

    @ray.remote(num_cpus=0)
    class Hammer:
        """Plays a session actor: ``callers`` conversations on one connector, through its PermitClient."""

        async def ready(self) -> bool:
            return True

        async def run(self, limits: Any, connector: Connector, callers: int, start_at: float, stop_at: float) -> dict[str, int]:
            from farm.actors.limiter import limiter_factory

            from farm.agents.openai import OpenAIAgent
            from farm.config import AgentConfig

            limiter = limiter_factory(limits)(connector.name)
            granted: list[float] = []

            class Noting:
                """The limiter, noting when each permit came (to tell the limiter's timing from the network's)."""

                async def acquire(self, tokens: int) -> None:
                    await limiter.acquire(tokens)
                    granted.append(time.time())

                def release(self, tokens_used: int) -> None:
                    limiter.release(tokens_used)

                def backoff(self, seconds: float) -> None:
                    limiter.backoff(seconds)

            agent = OpenAIAgent(connector, AgentConfig(id="bench"), limiter=Noting())
            counts: dict[str, Any] = {"sent": 0, "errors": 0}

            async def one() -> None:
                while time.time() < stop_at:
                    try:
                        await agent.send([{"role": "user", "content": "hello"}], {})
                        counts["sent"] += 1
                    except Exception:  # noqa: BLE001 - counted, the run goes on
                        counts["errors"] += 1

            await asyncio.sleep(max(0.0, start_at - time.time()))
            tasks = [asyncio.ensure_future(one()) for _ in range(callers)]
            await asyncio.sleep(max(0.0, stop_at - time.time()))
            for task in tasks:  # what still waits for a permit stops here
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await agent.aclose()
            counts["granted"] = granted
            return counts

    with JSONServer(handler) as server:
        connector = Connector(name="limited", base_url=server.url, rpm=rpm, timeout=30.0, max_retries=0)
        config = FarmConfig(connectors={"limited": connector})
        handles, limits = start_limiters(config, ["limited"], f"bench-{uuid.uuid4().hex[:6]}")
        hammers = [Hammer.options(max_concurrency=callers + 8).remote() for _ in range(actors)]
        ray.get([h.ready.remote() for h in hammers] + [handles["limited"].stats.remote()])
        start = time.time() + 0.5
        stop = start + seconds
        counts = ray.get([h.run.remote(limits, connector, callers, start, stop) for h in hammers])
        stats = ray.get(ray.get_actor(limiter_name(limits.scope, "limited")).stats.remote())
        with lock:
            seen = list(arrivals)
    for handle in [*hammers, *handles.values()]:
        ray.kill(handle, no_restart=True)

    figures = measure(seen, start, seconds, rpm)
    grants = [t for c in counts for t in c["granted"] if start <= t < stop]
    first_grant = min(grants) if grants else start
    figures["grants_busiest_1s_after_first_second"] = busiest(grants, 1.0, since=first_grant + 1.0)
    figures.update(
        benchmark="limiter_adherence",
        actors=actors,
        callers_per_actor=callers,
        agent_latency_s=latency,
        granted_by_limiter=stats["granted"],
        errors=sum(c["errors"] for c in counts),
    )
    return figures


def table(f: dict[str, Any]) -> str:
    def yes_no(n: int | None) -> str:
        return "n/a" if n is None else ("no" if n == 0 else f"YES ({n} windows)")

    rows = [
        ("requests received", f"{f['requests']} in {f['seconds']:g} s"),
        ("achieved rate", f"{f['achieved_rpm']:g}/min = {f['achieved_pct']:g} % of the {f['rpm_limit']}/min limit"),
        ("busiest 1-s window", f"{f['busiest_1s']} (limit {f['limit_1s']:g}; after the first second {f['busiest_1s_after_first_second']})"),
        ("busiest 10-s window", "n/a" if f["busiest_10s"] is None else f"{f['busiest_10s']} (limit {f['limit_10s']:g})"),
        ("1-s window above the limit after the first second", yes_no(f["windows_1s_above_limit_after_first_second"])),
        ("10-s window above the limit after the first second", yes_no(f["windows_10s_above_limit_after_first_second"])),
        ("requests per whole second", f"min {f['per_second_min']}, max {f['per_second_max']}"),
        ("permits in the busiest 1-s window (callers' clocks)", f"{f['grants_busiest_1s_after_first_second']} after the first second"),
        ("gap between arrivals", f"median {f['median_gap_ms']} ms, smallest {f['min_gap_ms']} ms"),
        ("callers", f"{f['actors']} actors x {f['callers_per_actor']}, agent latency {f['agent_latency_s']:g} s, errors {f['errors']}"),
    ]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the measured run (default 60)")
    parser.add_argument("--rpm", type=int, default=600, help="the connector's requests/minute limit (default 600)")
    parser.add_argument("--actors", type=int, default=2, help="caller actors (default 2)")
    parser.add_argument("--callers", type=int, default=50, help="concurrent callers per actor (default 50)")
    parser.add_argument("--latency", type=float, default=0.2, help="the server's answer time in seconds (default 0.2)")
    parser.add_argument("--json-only", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)

    import ray

    private_ray_env("farm-lim-")
    ray.init(num_cpus=2, include_dashboard=False, namespace="farm-bench", log_to_driver=False, logging_level="ERROR")
    try:
        figures = run(args.seconds, args.rpm, args.actors, args.callers, args.latency)
    finally:
        ray.shutdown()
    if not args.json_only:
        print(f"limiter adherence: rpm {args.rpm} for {args.seconds:g} s")
        print(table(figures))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
