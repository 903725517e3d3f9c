"""Scale: many single-turn cases through one driver — wall time and the driver's peak memory.

    python benchmarks/scale.py                       # 20k cases
    python benchmarks/scale.py --cases 100000 --json # figure (c) of benchmarks/README.md

What runs is :func:`farm._run.execution.execute` — what ``farm test`` runs: the cases
are loaded into the driver, dispatched to session actors on the embedded
local Ray, and every result is written to JSONL and Parquet as it arrives.
The agent is fast, so the farm is what is measured: by default an ``async``
Python agent that answers at once (``--agent http``: the fake OpenAI server
of ``fake_agent.py`` in its own process, with ``--latency``).

Memory is the driver process's: its peak RSS (``ru_maxrss``) and its RSS
sampled every 0.25 s (``/proc/self/status``), before loading the cases,
after loading them, and during the run — flat means results are not piling
up. Target: peak ≤ 500 MiB at 100k cases.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import REPLY, FakeAgent, config_toml  # noqa: E402
from private_ray import private_ray_env  # noqa: E402  (beside this script)

PYTHON_AGENT = f'''
async def agent(messages, options):
    return {REPLY!r}
'''


def rss_mib() -> float:
    """The current resident set of this process, in MiB (0 where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class RSSSampler:
    def __init__(self, every: float = 1.0):
        self.samples: list[float] = []
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(round(rss_mib(), 1))

    def __enter__(self) -> RSSSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--parallel", type=int, default=256)
    parser.add_argument("--agent", choices=("python", "http"), default="python")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per reply of the http agent")
    parser.add_argument("--engine", choices=("local", "ray"), default="ray")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    base = Path(private_ray_env("farm-scale-"))

    from farm.actors.cluster import connect

    from farm._run.execution import RunOutputs, execute
    from farm.config import load_config
    from farm.conversation.settings import RunSettings
    from farm.engines import RunPlan, make_engine
    from farm.suite.loader import parse_cases
    from farm.writers import RunInfo

    server = FakeAgent(args.latency).start() if args.agent == "http" else None
    cluster = connect(None) if args.engine == "ray" else None
    report: dict[str, Any] = {"benchmark": "scale", "engine": args.engine, "cases": args.cases, "parallel": args.parallel, "agent": args.agent}
    try:
        if server:
            (base / "farm.toml").write_text(config_toml(server.url))
        else:
            (base / "bench_agent.py").write_text(PYTHON_AGENT)
            (base / "farm.toml").write_text('[farm]\ndefault_agent = "target"\n\n[agents.target]\nkind = "python"\nentry = "bench_agent:agent"\n')
        config = load_config(base / "farm.toml")
        report["rss_before_load_mib"] = round(rss_mib(), 1)
        started = time.perf_counter()
        check = [{"type": "contains", "value": "fake agent"}]
        cases = parse_cases(((f"scale:{i}", {"id": f"c{i:06d}", "input": "Hello", "assertions": check}) for i in range(args.cases)), compact=True)
        report["load_s"] = round(time.perf_counter() - started, 2)
        report["rss_after_load_mib"] = round(rss_mib(), 1)

        run_dir = base / "run"
        plan = RunPlan(config=config, cases=cases, settings=RunSettings(agent_id="target", run_id="scale"), parallel=args.parallel)
        del cases
        started, cpu = time.perf_counter(), time.process_time()
        with RSSSampler(every=0.25) as sampler:
            summary = execute(plan, RunOutputs(run_dir=run_dir, jsonl=run_dir / "results.jsonl"), make_engine(args.engine), info=RunInfo(run_id="scale", command=["benchmark"]))
        wall = time.perf_counter() - started
        report["rss_after_run_mib"] = round(rss_mib(), 1)
        lines = sum(1 for _ in open(run_dir / "results.jsonl", "rb"))
        report.update(
            wall_s=round(wall, 2),
            cases_per_s=round(args.cases / wall, 1),
            driver_cpu_s=round(time.process_time() - cpu, 2),
            passed=summary.passed,
            total=summary.total,
            jsonl_lines=lines,
            jsonl_mib=round((run_dir / "results.jsonl").stat().st_size / 2**20, 1),
            parquet_mib=round(sum(p.stat().st_size for p in run_dir.glob("*.parquet")) / 2**20, 1),
            rss_during_run_mib={"min": min(sampler.samples, default=0), "max": max(sampler.samples, default=0), "last": sampler.samples[-1] if sampler.samples else 0},
            rss_samples_every_10s=sampler.samples[::40],
            driver_peak_rss_mib=round(peak_rss_mib(), 1),
        )
    finally:
        if cluster is not None:
            cluster.shutdown()
        if server:
            server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
