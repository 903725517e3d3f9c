"""HTTP clients: the CPU one JSON request costs the client, with many requests in flight.

    python benchmarks/http_clients.py                    # 3000 requests, 128 in flight, 200 ms agent
    python benchmarks/http_clients.py --requests 6000 --parallel 400 --latency 0.05

Why the farm sends through aiohttp (``farm.agents.transport.HTTPClient``): each
client below sends the same ``/chat/completions`` requests to the fake agent of
``fake_agent.py`` (its own process) from one asyncio process, and the
process's CPU time is divided by the requests. Rows:

- ``farm``: the farm's ``HTTPClient`` (one aiohttp pool sized to the requests in flight);
- ``aiohttp-trust-env``: the same with aiohttp's ``trust_env=True``, which looks
  the proxy up again on every request, in a thread (the farm decides once per host);
- ``httpx-4`` / ``httpx-1``: httpx clients of 4 and 1 connections (one big
  httpx pool is slower still, RAY_NOTES), when httpx is installed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

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


async def farm_client(url: str, requests: int, parallel: int, trust_env: bool = False) -> None:
    from farm.agents.transport import HTTPClient

    client = HTTPClient(parallel)
    if trust_env:  # what aiohttp does with trust_env=True: the proxy looked up per request
        session = client._open()
        session._trust_env = True
        client._proxies = {}

    async def send(url: str, payload: bytes) -> Any:
        reply = await client.request("POST", url, body=payload, headers=HEADERS, timeout=60.0, connect_timeout=10.0)
        return reply.json()

    try:
        await _drive(send, url, requests, parallel)
    finally:
        await client.aclose()


async def httpx_clients(url: str, requests: int, parallel: int, per_client: int) -> None:
    import httpx

    clients = [
        httpx.AsyncClient(timeout=60.0, limits=httpx.Limits(max_connections=per_client, max_keepalive_connections=per_client))
        for _ in range(max(1, parallel // per_client))
    ]
    turn = iter(range(10**12))

    async def send(url: str, payload: bytes) -> Any:
        client = clients[next(turn) % len(clients)]
        return (await client.post(url, content=payload, headers=HEADERS)).json()

    try:
        await _drive(send, url, requests, parallel)
    finally:
        for client in clients:
            await client.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--parallel", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    clients: dict[str, Callable[[str], Awaitable[None]]] = {
        "farm": lambda url: farm_client(url, args.requests, args.parallel),
        "aiohttp-trust-env": lambda url: farm_client(url, args.requests, args.parallel, trust_env=True),
    }
    try:
        import httpx  # noqa: F401

        clients["httpx-4"] = lambda url: httpx_clients(url, args.requests, args.parallel, 4)
        clients["httpx-1"] = lambda url: httpx_clients(url, args.requests, args.parallel, 1)
    except ImportError:
        print("httpx is not installed: its rows are left out", file=sys.stderr)

    import farm.agents.transport  # noqa: F401  (imported before the clock starts)

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
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps({"benchmark": "http_clients", "ideal_s": round(ideal, 2), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
