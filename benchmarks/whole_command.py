"""The whole command: ``farm test`` on N single-turn cases, timed as a user times it.

    python benchmarks/whole_command.py                   # 1000 cases, 200 ms agent, default --parallel
    python benchmarks/whole_command.py --parallel 100 --repeat 3 --json

Each run is a fresh ``farm test -i suite.jsonl`` process per engine (``--engines``:
the local engine, and the ray engine on an embedded local Ray in a private temp
folder), against the fake agent of ``fake_agent.py`` in its own process.
Reported, in the same run:

- **ideal**: cases x latency / parallel (1000 x 0.2 s / 128 = 1.56 s);
- **asyncio**: the same requests from a bare aiohttp client (no farm code) in
  one fresh Python process, its start-up included: the floor for any Python tool;
- **threads**: the same from a bare stdlib client (``http.client``, one thread and
  one keep-alive connection per request in flight), as the issue's "bare Python client";
- **httpx**: the same from a bare process sending through the farm's own HTTP
  client (httpx on its aiohttp transport), so ``farm_vs_httpx`` is the farm's
  overhead above its transport;
- **farm**: the whole ``farm test`` process, from exec to exit; and its parts:
  ``start_s`` (Python, imports, loading the suite), then from ``run.json``'s
  ``timings`` (seconds from the run's start) the engine ready, first and last
  result, and ``exit_s``: from the outputs closed to the process gone (stopping Ray);
  ``first_result_from_exec_s`` is the first result counted from the process's exec;
  ``farm_cpu_s``: the farm process's CPU (user + system, from its rusage).

The children run with bytecode caches on (``PYTHONDONTWRITEBYTECODE`` removed), as an
installed farm runs.

``--address`` runs the farm against an existing cluster instead (no Ray to start).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent, config_toml  # noqa: E402  (beside this script)

CHECK = "fake agent"

BASELINE = r'''
import asyncio, json, sys, time
import aiohttp

async def main(url, n, parallel):
    cases = iter(range(n))
    failures = 0
    connector = aiohttp.TCPConnector(limit=parallel)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker():
            nonlocal failures
            for i in cases:
                body = {{"model": "fake", "messages": [{{"role": "user", "content": f"Hello {{i}}"}}]}}
                async with session.post(url, json=body) as reply:
                    data = await reply.json()
                failures += {check!r} not in data["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(parallel)))
    print(failures)

asyncio.run(main({url!r}, {n}, {parallel}))
'''


THREADS = r'''
import http.client, json, threading
from urllib.parse import urlsplit

url = urlsplit({url!r})
cases = iter(range({n}))
lock = threading.Lock()
failures = []

def worker():
    connection = http.client.HTTPConnection(url.hostname, url.port)
    while True:
        with lock:
            i = next(cases, None)
        if i is None:
            return
        body = json.dumps({{"model": "fake", "messages": [{{"role": "user", "content": f"Hello {{i}}"}}]}})
        connection.request("POST", url.path, body, {{"Content-Type": "application/json"}})
        data = json.loads(connection.getresponse().read())
        failures.append({check!r} not in data["choices"][0]["message"]["content"])

threads = [threading.Thread(target=worker) for _ in range(min({parallel}, {n}))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sum(failures))
'''


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _farm_env(base: Path) -> dict[str, str]:
    """A private Ray for the child: its own temp folder and home, no inherited address or auth mode."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(RAY_TMPDIR=str(base), HOME=str(base), RAY_AUTH_MODE="disabled")
    return env


def run_farm(folder: Path, parallel: int | None, address: str | None, engine: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "farm.cli", "test", "-i", "suite.jsonl", "--engine", engine]
    command += ["--parallel", str(parallel)] if parallel else []
    command += ["--address", address] if address else []
    started, started_at, cpu = time.perf_counter(), time.time(), _cpu()
    done = subprocess.run(command, cwd=folder, env=_farm_env(folder), capture_output=True, text=True, timeout=600)
    wall, cpu = time.perf_counter() - started, _cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"farm test exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    [run_json] = (folder / "results").glob("*/run.json")
    info = json.loads(run_json.read_text())
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "before_run_s": info["started_at"] - started_at,
        "timings": info.get("timings", {}),
        "counts": info.get("counts", {}),
        "parallel": info.get("parallel"),
    }


BASELINE_HTTPX = r'''
import asyncio, json, sys
sys.path.insert(0, {root!r})
from farm.agents.transport import HTTPClient

async def main(url, n, parallel):
    client = HTTPClient(parallel)
    cases = iter(range(n))
    failures = 0

    async def worker():
        nonlocal failures
        for i in cases:
            body = json.dumps({{"model": "fake", "messages": [{{"role": "user", "content": f"Hello {{i}}"}}]}}).encode()
            reply = await client.request("POST", url, body=body, headers={{"Content-Type": "application/json"}}, timeout=60.0, connect_timeout=10.0)
            failures += {check!r} not in reply.json()["choices"][0]["message"]["content"]

    await asyncio.gather(*(worker() for _ in range(parallel)))
    await client.aclose()
    print(failures)

asyncio.run(main({url!r}, {n}, {parallel}))
'''


def run_baseline(url: str, n: int, parallel: int, template: str = BASELINE) -> dict[str, Any]:
    code = template.format(root=str(ROOT), url=f"{url}/v1/chat/completions", n=n, parallel=parallel, check=CHECK)
    started, cpu = time.perf_counter(), _cpu()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    wall, cpu = time.perf_counter() - started, _cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"the baseline failed:\n{done.stderr[-2000:]}")
    return {"wall_s": wall, "cpu_s": cpu, "failures": int(done.stdout.strip() or -1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--parallel", type=int, default=None, help="the farm's --parallel (default: the farm's own default)")
    parser.add_argument("--address", default=None, help="an existing Ray cluster to run on")
    parser.add_argument("--engines", default="local,ray", help="comma-separated engines to time, each in its own process")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    rows = []
    engines = [e for e in args.engines.split(",") if e]
    with FakeAgent(args.latency) as agent:
        for _ in range(args.repeat):
            farms = {}
            for engine in engines:
                folder = Path(tempfile.mkdtemp(prefix="farm-wc-", dir="/tmp"))
                try:
                    cases = (json.dumps({"id": f"c{i:05d}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": CHECK}]}) for i in range(args.cases))
                    (folder / "suite.jsonl").write_text("\n".join(cases) + "\n")
                    (folder / "farm.toml").write_text(config_toml(agent.url))
                    farms[engine] = run_farm(folder, args.parallel, args.address, engine)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
            parallel = next(iter(farms.values()))["parallel"] or args.parallel
            ideal = args.cases * args.latency / parallel
            base = run_baseline(agent.url, args.cases, parallel)
            httpx_base = run_baseline(agent.url, args.cases, parallel, BASELINE_HTTPX)
            threads_base = run_baseline(agent.url, args.cases, parallel, THREADS)
            for engine, farm in farms.items():
                t = farm["timings"]
                row = {
                    "engine": engine,
                    "cases": args.cases,
                    "latency_s": args.latency,
                    "parallel": parallel,
                    "ideal_s": round(ideal, 2),
                    "asyncio_s": round(base["wall_s"], 2),
                    "asyncio_x": round(base["wall_s"] / ideal, 2),
                    "farm_s": round(farm["wall_s"], 2),
                    "farm_x": round(farm["wall_s"] / ideal, 2),
                    "farm_vs_asyncio": round(farm["wall_s"] / base["wall_s"], 2),
                    "threads_s": round(threads_base["wall_s"], 2),
                    "threads_cpu_s": round(threads_base["cpu_s"], 2),
                    "farm_vs_threads": round(farm["wall_s"] / threads_base["wall_s"], 2),
                    "farm_cpu_s": round(farm["cpu_s"], 2),
                    "httpx_s": round(httpx_base["wall_s"], 2),
                    "farm_vs_httpx": round(farm["wall_s"] / httpx_base["wall_s"], 2),
                    "start_s": round(farm["before_run_s"], 2),
                    "engine_ready_s": t.get("engine_ready_s"),
                    "first_result_s": t.get("first_result_s"),
                    "first_result_from_exec_s": round(farm["before_run_s"] + t["first_result_s"], 2) if t.get("first_result_s") else None,
                    "last_result_s": t.get("last_result_s"),
                    "exit_s": round(farm["wall_s"] - farm["before_run_s"] - t["closed_s"], 2) if t.get("closed_s") else None,
                    "passed": farm["counts"].get("passed"),
                    "asyncio_failures": base["failures"],
                }
                rows.append(row)
                if not args.json:
                    print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps({"benchmark": "whole_command", "rows": rows, "fake_agent": {"requests": agent.requests, "cpu_s": agent.cpu_s}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
