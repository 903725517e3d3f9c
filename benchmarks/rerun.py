"""Runs again from one process on the same Ray: what keeping the session and role actors saves.

    python benchmarks/rerun.py                      # 10 judged cases, 6 runs each way
    python benchmarks/rerun.py --cases 10 --runs 6 --json

One process starts a private local Ray (two CPUs) and the fake agent (``fake_agent.py``), then
calls ``farm.run`` on that Ray again and again, alternating two ways:

- **kept** (the farm's way): each run takes the session and role pool actors the last one kept;
- **fresh**: the kept actors are stopped before the run, so it starts its own, as every run
  did before actors were kept.

Each case is judged by a validator (a python role agent, so the run has a validator pool
too). Reported per way: the median wall time of a run and the median CPU it cost the machine
(``/proc/stat``: the actors are processes of their own), and the ratios kept/fresh. The very
first run (fresh by necessity) is left out. CPU is the measure to trust on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent  # noqa: E402  (beside this script)
from private_ray import private_ray_env  # noqa: E402


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent so far (every process, kernel included)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def project(folder: Path, url: str, cases: int) -> Path:
    (folder / "farm.toml").write_text(f"""
[farm]
default_agent = "bot"
results_dir = "results"
engine = "ray"

[connectors.fake]
base_url = "{url}/v1"
model = "fake"

[agents.bot]
kind = "openai"
connector = "fake"

[agents.judge]
kind = "python"
entry = "farm.demo.agent:validator"
""")
    judged = {"type": "agent", "use": "agents:judge", "options": {"metadata": {"must_mention": []}}}
    suite = folder / "suite.jsonl"
    suite.write_text("".join(json.dumps({"id": f"c{i}", "input": "Hello", "assertions": [judged]}) + "\n" for i in range(cases)))
    return suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--runs", type=int, default=6, help="runs each way")
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    private_ray_env("farm-rerun-")
    import ray
    from farm.actors.session import WARM, WARM_ROLES
    from rich.console import Console

    import farm

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    figures: dict[str, list[tuple[float, float]]] = {"kept": [], "fresh": []}
    try:
        with FakeAgent(args.latency) as agent, tempfile.TemporaryDirectory(prefix="farm-rerun-") as folder:
            suite = project(Path(folder), agent.url, args.cases)

            def one() -> tuple[float, float]:
                cpu, wall = machine_cpu(), time.perf_counter()
                result = farm.run(str(suite), config=Path(folder) / "farm.toml", console=Console(quiet=True), skip_interactive=True)
                took = (time.perf_counter() - wall, machine_cpu() - cpu)
                if result.exit_code != 0:
                    raise SystemExit(f"a run failed ({result.exit_code}): {result.run_dir}")
                return took

            one()  # the first run starts every actor whichever way
            for _ in range(args.runs):
                for way in ("fresh", "kept"):
                    if way == "fresh":
                        WARM.clear()
                        WARM_ROLES.clear()
                        time.sleep(0.5)  # their processes exit before the clock starts
                    figures[way].append(one())
    finally:
        ray.shutdown()

    report = {
        way: {"wall_s": round(statistics.median(w for w, _ in rows), 3), "cpu_s": round(statistics.median(c for _, c in rows), 3)}
        for way, rows in figures.items()
    }
    report["ratio"] = {
        "wall": round(report["kept"]["wall_s"] / report["fresh"]["wall_s"], 2),
        "cpu": round(report["kept"]["cpu_s"] / report["fresh"]["cpu_s"], 2),
    }
    if args.json:
        print(json.dumps({"cases": args.cases, "runs": args.runs, **report}))
        return
    print(f"{args.cases} judged cases, {args.runs} runs each way, medians")
    for way in ("fresh", "kept"):
        print(f"  {way:6} wall {report[way]['wall_s']:6.2f} s   machine CPU {report[way]['cpu_s']:6.2f} s")
    print(f"  kept/fresh: wall {report['ratio']['wall']:.2f}×, CPU {report['ratio']['cpu']:.2f}×")


if __name__ == "__main__":
    main()
