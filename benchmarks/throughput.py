"""Throughput: N multi-turn conversations against an agent with a fixed latency.

    python benchmarks/throughput.py                      # 2000 x 3 turns at 50 ms and 500 ms, 400 in flight
    python benchmarks/throughput.py --latencies 0.05 --repeat 3 --agent python --json

For each latency, in the same run:

- **ideal**: calls x latency / concurrency (6000 x 0.05 s / 400 = 0.75 s);
- **asyncio**: a plain-asyncio baseline in this one process, no Ray, the same
  conversations, ``--parallel`` at once;
- **farm**: :func:`farm._run.execution.execute` — what ``farm test --parallel N`` runs:
  session actors on the embedded local Ray, results written to JSONL and
  Parquet. The wall time includes starting the actors, not starting Ray.

``--agent`` picks the agent both of them talk to:

- ``http`` (default): a fake OpenAI-compatible server in its own process
  (``fake_agent.py``), reached over real HTTP; the connector has a
  generous ``max_concurrency``, so the farm's cluster-wide limiter hands out a
  permit for every request without ever making one wait. The baseline sends
  through the farm's own HTTP client (one aiohttp pool), without Ray.
- ``python``: an ``async`` Python agent that sleeps ``latency`` (the baseline
  sleeps the same in-process): no HTTP and no limiter, so what is left is the
  farm's own cost — Ray calls, the conversation runner, results.

``farm_steady_s`` leaves out the fixed start-up: from the first conversation's
start to the last one's end. ``busy`` is the share of the machine's CPUs in use during a run (from
``/proc/stat``): near 1.0 means the run was CPU-bound, not latency-bound.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import REPLY, FakeAgent, config_toml  # noqa: E402
from private_ray import private_ray_env  # noqa: E402  (beside this script)

CHECK = "fake agent"

PYTHON_AGENT = '''
import asyncio

LATENCY = {latency!r}


async def agent(messages, options):
    await asyncio.sleep(LATENCY)
    return {reply!r}
'''


def _cases(n: int, turns: int) -> list[dict[str, Any]]:
    check = [{"type": "contains", "value": CHECK}]
    if turns == 1:
        return [{"id": f"c{i:06d}", "input": "Hello", "assertions": check} for i in range(n)]
    return [{"id": f"c{i:06d}", "turns": [{"input": f"Turn {t} of case {i}", "assertions": check} for t in range(turns)]} for i in range(n)]


class CPUMeter:
    """The share of all CPUs busy between start and stop, from /proc/stat (None elsewhere)."""

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields) - idle, sum(fields)

    def __enter__(self) -> CPUMeter:
        self._start = self._read()
        self.busy: float | None = None
        return self

    def __exit__(self, *exc: Any) -> None:
        end = self._read()
        if self._start and end and end[1] > self._start[1]:
            self.busy = round((end[0] - self._start[0]) / (end[1] - self._start[1]), 2)


# -- the plain-asyncio baseline --------------------------------------------------


async def _baseline_http(url: str, n: int, turns: int, parallel: int) -> int:
    """The same conversations through the farm's HTTP client (one aiohttp pool), no Ray, no runner."""
    from farm.agents.transport import HTTPClient

    client = HTTPClient(parallel)
    endpoint = f"{url}/v1/chat/completions"
    headers = {"Content-Type": "application/json"}
    gate = asyncio.Semaphore(parallel)
    failures = 0

    async def conversation(i: int) -> None:
        nonlocal failures
        messages: list[dict[str, Any]] = []
        async with gate:
            for t in range(turns):
                messages.append({"role": "user", "content": f"Turn {t} of case {i}"})
                body = json.dumps({"model": "fake", "messages": messages}).encode()
                reply = await client.request("POST", endpoint, body=body, headers=headers, timeout=60.0, connect_timeout=10.0)
                content = reply.json()["choices"][0]["message"]["content"] or ""
                messages.append({"role": "assistant", "content": content})
                failures += CHECK not in content

    try:
        await asyncio.gather(*(conversation(i) for i in range(n)))
    finally:
        await client.aclose()
    return failures


async def _baseline_python(latency: float, n: int, turns: int, parallel: int) -> int:
    gate = asyncio.Semaphore(parallel)

    async def conversation(i: int) -> None:
        messages: list[dict[str, Any]] = []
        async with gate:
            for t in range(turns):
                messages.append({"role": "user", "content": f"Turn {t} of case {i}"})
                await asyncio.sleep(latency)
                messages.append({"role": "assistant", "content": REPLY})

    await asyncio.gather(*(conversation(i) for i in range(n)))
    return 0


def baseline(agent: str, url: str, latency: float, n: int, turns: int, parallel: int) -> dict[str, Any]:
    started, cpu = time.perf_counter(), time.process_time()
    with CPUMeter() as meter:
        if agent == "http":
            failures = asyncio.run(_baseline_http(url, n, turns, parallel))
        else:
            failures = asyncio.run(_baseline_python(latency, n, turns, parallel))
    return {"wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu, "busy": meter.busy, "failures": failures}


# -- the farm ----------------------------------------------------------------------


def farm(agent: str, url: str, latency: float, n: int, turns: int, parallel: int, max_concurrency: int, folder: Path, engine: str = "ray") -> dict[str, Any]:
    from farm._run.execution import RunOutputs, execute
    from farm.config import load_config
    from farm.conversation.settings import RunSettings
    from farm.engines import RunPlan, make_engine
    from farm.suite.loader import parse_cases
    from farm.writers import RunInfo

    if agent == "http":
        (folder / "farm.toml").write_text(config_toml(url, max_concurrency=max_concurrency))
    else:
        (folder / "bench_agent.py").write_text(PYTHON_AGENT.format(latency=latency, reply=REPLY))
        (folder / "farm.toml").write_text('[farm]\ndefault_agent = "target"\n\n[agents.target]\nkind = "python"\nentry = "bench_agent:agent"\n')
    config = load_config(folder / "farm.toml")
    run_id = f"throughput-{int(time.time() * 1000)}"
    plan = RunPlan(
        config=config,
        cases=parse_cases([(f"bench:{i}", case) for i, case in enumerate(_cases(n, turns))]),
        settings=RunSettings(agent_id="target", run_id=run_id),
        parallel=parallel,
    )
    run_dir = folder / run_id
    first: list[float] = []
    span = [float("inf"), 0.0]  # the first conversation's start, the last one's end (unix time)
    started, cpu = time.perf_counter(), time.process_time()

    def on_result(result: Any) -> None:
        if not first:
            first.append(time.perf_counter() - started)
        if result.started_at:
            span[0] = min(span[0], result.started_at)
            span[1] = max(span[1], result.started_at + result.duration_ms / 1000)

    with CPUMeter() as meter:
        summary = execute(plan, RunOutputs(run_dir=run_dir, jsonl=run_dir / "results.jsonl"), make_engine(engine), info=RunInfo(run_id=run_id, command=["benchmark"]), on_result=on_result)
    return {
        "wall_s": time.perf_counter() - started,
        "driver_cpu_s": time.process_time() - cpu,
        "first_result_s": first[0] if first else None,
        "steady_s": span[1] - span[0] if span[1] else None,
        "busy": meter.busy,
        "passed": summary.passed,
        "total": summary.total,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--latencies", default="0.05,0.5", help="comma-separated seconds per reply")
    parser.add_argument("--parallel", type=int, default=400, help="conversations in flight (the farm's --parallel)")
    parser.add_argument("--agent", choices=("http", "python"), default="http")
    parser.add_argument("--max-concurrency", type=int, default=1000, help="the connector's max_concurrency: generous, so the limiter is exercised but never binds")
    parser.add_argument("--repeat", type=int, default=1, help="runs per latency (the machines are noisy)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--no-farm", action="store_true")
    parser.add_argument("--engine", choices=("local", "ray"), default="ray", help="the farm's engine")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    base = private_ray_env("farm-tp-")

    rows: list[dict[str, Any]] = []
    agents: list[dict[str, Any]] = []
    cluster = None
    try:
        if not args.no_farm and args.engine == "ray":
            from farm.actors.cluster import connect

            cluster = connect(None)
        for latency in (float(x) for x in args.latencies.split(",")):
            calls = args.conversations * args.turns
            ideal = calls * latency / args.parallel
            server = FakeAgent(latency) if args.agent == "http" else None
            url = server.start().url if server else ""
            try:
                for attempt in range(args.repeat):
                    row: dict[str, Any] = {"agent": args.agent, "latency_s": latency, "calls": calls, "parallel": args.parallel, "ideal_s": round(ideal, 3), "repeat": attempt}
                    if not args.no_baseline:
                        b = baseline(args.agent, url, latency, args.conversations, args.turns, args.parallel)
                        row.update(asyncio_s=round(b["wall_s"], 3), asyncio_x=round(b["wall_s"] / ideal, 2), asyncio_cpu_s=round(b["cpu_s"], 2), asyncio_busy=b["busy"], asyncio_failures=b["failures"])
                    if not args.no_farm:
                        folder = Path(tempfile.mkdtemp(prefix="run-", dir=base))
                        f = farm(args.agent, url, latency, args.conversations, args.turns, args.parallel, args.max_concurrency, folder, args.engine)
                        row.update(
                            farm_s=round(f["wall_s"], 3),
                            farm_x=round(f["wall_s"] / ideal, 2),
                            farm_first_result_s=round(f["first_result_s"] or 0, 3),
                            farm_steady_s=round(f["steady_s"] or 0, 3),
                            farm_steady_x=round((f["steady_s"] or 0) / ideal, 2),
                            farm_driver_cpu_s=round(f["driver_cpu_s"], 2),
                            farm_busy=f["busy"],
                            farm_passed=f["passed"],
                            farm_total=f["total"],
                        )
                        if "asyncio_s" in row:
                            row["farm_vs_asyncio"] = round(f["wall_s"] / row["asyncio_s"], 2)
                        shutil.rmtree(folder, ignore_errors=True)
                    rows.append(row)
                    if not args.json:
                        print(json.dumps(row), flush=True)
            finally:
                if server:
                    server.stop()
                    agents.append({"latency_s": latency, "requests": server.requests, "cpu_s": server.cpu_s})
                    if not args.json:
                        print(json.dumps({"fake_agent": agents[-1]}), flush=True)
    finally:
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps({"benchmark": "throughput", "conversations": args.conversations, "turns": args.turns, "rows": rows, "fake_agent": agents}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
