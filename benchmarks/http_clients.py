"""HTTP clients: the CPU one JSON request costs the client, with many requests in flight.

    python benchmarks/http_clients.py                    # 3000 requests, 128 in flight, 200 ms agent
    python benchmarks/http_clients.py --requests 6000 --parallel 400 --latency 0.05

Which transport the farm puts beneath httpx (``farm.agents.transport``): each
client below sends the same ``/chat/completions`` requests to the fake agent of
``fake_agent.py`` (its own process) from one asyncio process, and the
process's CPU time is divided by the requests. Rows:

- ``aiohttp``: plain aiohttp, one pool sized to the requests in flight, the
  proxy decided once per host: the farm's client before it moved to httpx,
  the reference the others are measured against;
- ``aiohttp-trust-env``: the same with aiohttp's ``trust_env=True``, which looks
  the proxy up again on every request, in a thread;
- ``farm``: the farm's ``HTTPClient``: httpx on its own ``AiohttpTransport``
  (one aiohttp pool), the body read through the bounded reader;
- ``farm-on-httpx-aiohttp``: the same ``HTTPClient`` on the ``httpx-aiohttp``
  package's ``AiohttpTransport`` (one pool), when that package is installed;
- ``farm-on-httpcore-16`` / ``-4``: the same ``HTTPClient`` on httpx's own
  httpcore pools, several clients of 16 or 4 connections taken in turn (one big
  httpcore pool is slower still, httpx issue #3215; ``--big-pool`` adds it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent  # noqa: E402  (beside this script)

BODY = {"model": "fake", "messages": [{"role": "user", "content": "Hello, how do I file an expense? " * 3}]}
HEADERS = {"Content-Type": "application/json"}

Sender = Callable[[str, bytes], Awaitable[Any]]


async def _drive(send: Sender, url: str, requests: int, parallel: int) -> None:
    left = iter(range(requests))
    payload = json.dumps(BODY).encode()

    async def worker() -> None:
        for _ in left:
            await send(url, payload)

    await asyncio.gather(*(worker() for _ in range(parallel)))


async def aiohttp_client(url: str, requests: int, parallel: int, trust_env: bool = False) -> None:
    """What the farm's client did before httpx: one aiohttp pool, the whole body read at once."""
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=parallel), headers={"User-Agent": "agent-test-farm"}, trust_env=trust_env
    )
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=60.0)

    async def send(url: str, payload: bytes) -> Any:
        async with session.request(
            "POST", url, data=payload, headers=HEADERS, timeout=timeout, proxy=None, allow_redirects=False
        ) as response:
            return json.loads(await response.read())

    try:
        await _drive(send, url, requests, parallel)
    finally:
        await session.close()


async def farm_clients(url: str, requests: int, parallel: int, transport: Callable[[], Any] | None = None, per_client: int | None = None) -> None:
    """The farm's ``HTTPClient``; with ``per_client``, several of them of that many connections, in turn."""
    from farm.agents.transport import HTTPClient

    size = per_client or parallel
    clients = [
        HTTPClient(size, transport=transport() if transport else None) for _ in range(max(1, parallel // size))
    ]
    turn = iter(range(10**12))

    async def send(url: str, payload: bytes) -> Any:
        client = clients[next(turn) % len(clients)]
        reply = await client.request("POST", url, body=payload, headers=HEADERS, timeout=60.0, connect_timeout=10.0)
        return reply.json()

    try:
        await _drive(send, url, requests, parallel)
    finally:
        for client in clients:
            await client.aclose()


def _httpcore(connections: int) -> Callable[[], Any]:
    import httpx

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return lambda: httpx.AsyncHTTPTransport(limits=limits)


def _httpx_aiohttp(connections: int) -> Callable[[], Any]:
    import httpx
    from httpx_aiohttp import AiohttpTransport

    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return lambda: AiohttpTransport(limits=limits)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--parallel", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--big-pool", action="store_true", help="add httpcore with one pool of --parallel connections")
    parser.add_argument("--only", nargs="*", help="only these rows")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    n, p = args.requests, args.parallel
    clients: dict[str, Callable[[str], Awaitable[None]]] = {
        "aiohttp": lambda url: aiohttp_client(url, n, p),
        "aiohttp-trust-env": lambda url: aiohttp_client(url, n, p, trust_env=True),
        "farm": lambda url: farm_clients(url, n, p),
    }
    if importlib.util.find_spec("httpx_aiohttp"):
        clients["farm-on-httpx-aiohttp"] = lambda url: farm_clients(url, n, p, _httpx_aiohttp(p))
    else:
        print("httpx-aiohttp is not installed: its row is left out", file=sys.stderr)
    clients["farm-on-httpcore-16"] = lambda url: farm_clients(url, n, p, _httpcore(16), per_client=16)
    clients["farm-on-httpcore-4"] = lambda url: farm_clients(url, n, p, _httpcore(4), per_client=4)
    if args.big_pool:
        clients[f"farm-on-httpcore-{p}"] = lambda url: farm_clients(url, n, p, _httpcore(p))
    if args.only:
        clients = {name: run for name, run in clients.items() if name in args.only}

    import aiohttp  # noqa: F401  (imported before the clock starts)

    import farm.agents.transport  # noqa: F401

    ideal = args.requests * args.latency / args.parallel
    rows = []
    with FakeAgent(args.latency) as agent:
        url = f"{agent.url}/v1/chat/completions"
        for name, run in clients.items():
            started, cpu = time.perf_counter(), time.process_time()
            asyncio.run(run(url))
            wall, used = time.perf_counter() - started, time.process_time() - cpu
            row = {
                "client": name,
                "requests": args.requests,
                "parallel": args.parallel,
                "wall_s": round(wall, 2),
                "wall_x_ideal": round(wall / ideal, 2),
                "cpu_ms_per_request": round(used / args.requests * 1000, 3),
            }
            if rows and rows[0]["client"] == "aiohttp":
                row["cpu_x_aiohttp"] = round(row["cpu_ms_per_request"] / rows[0]["cpu_ms_per_request"], 2)
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps({"benchmark": "http_clients", "ideal_s": round(ideal, 2), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
