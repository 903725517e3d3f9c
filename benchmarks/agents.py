"""Two agents in one run against two runs of one agent each: what running ``-n A -n B`` costs.

    python benchmarks/agents.py                       # 1000 cases, 50 ms agent, 3 rounds
    python benchmarks/agents.py --cases 1000 --repeat 5 --json

Each round runs, as fresh ``farm test`` processes on the local engine against the fake agent
of ``fake_agent.py`` (its own process): ``-n A`` on N cases, ``-n B`` on N cases, and
``-n A -n B`` on the same N cases (2N case runs), in an order that alternates between rounds.
Reported: the CPU (user + system) of each farm process, and **ratio**: the CPU of the
two-agent run over the sum of the two one-agent runs (target: at most 1.05), with the wall
times beside them. CPU, not wall time, is the measure: the machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fake_agent import FakeAgent  # noqa: E402  (beside this script)


def farm_toml(url: str, results_dir: str) -> str:
    return f"""
[farm]
default_agent = "A"
results_dir = "{results_dir}"
engine = "local"

[connectors.fake]
base_url = "{url}/v1"
model = "fake"
timeout = "60s"
max_retries = 2

[agents.A]
kind = "openai"
connector = "fake"

[agents.B]
kind = "openai"
connector = "fake"
"""


def farm_cpu(folder: Path, agents: list[str], parallel: int) -> tuple[float, float, int]:
    """``(cpu seconds, wall seconds, results)`` of one ``farm test`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-m", "farm.cli", "test", "-i", "suite.jsonl", "--parallel", str(parallel)]
    for agent in agents:
        command += ["-n", agent]
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"farm test {' '.join(agents)} failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    newest = max((folder / "results").iterdir(), key=os.path.getmtime)
    results = sum(1 for _ in open(newest / "results.jsonl", encoding="utf-8"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    rounds = []
    with FakeAgent(args.latency) as agent:
        for round_index in range(args.repeat):
            folder = Path(tempfile.mkdtemp(prefix="farm-agents-", dir="/tmp"))
            (folder / "farm.toml").write_text(farm_toml(agent.url, str(folder / "results")))
            lines = (json.dumps({"id": f"c{i:05d}", "input": f"Hello {i}", "assertions": [{"type": "contains", "value": "fake agent"}]}) for i in range(args.cases))
            (folder / "suite.jsonl").write_text("\n".join(lines) + "\n")
            order = [["A"], ["B"], ["A", "B"]]
            if round_index % 2:
                order.reverse()
            figures = {" ".join(agents): farm_cpu(folder, agents, args.parallel) for agents in order}
            one_a, one_b, both = figures["A"], figures["B"], figures["A B"]
            assert one_a[2] == one_b[2] == args.cases and both[2] == 2 * args.cases, figures
            rounds.append(
                {
                    "cpu_a_s": round(one_a[0], 3),
                    "cpu_b_s": round(one_b[0], 3),
                    "cpu_both_s": round(both[0], 3),
                    "ratio": round(both[0] / (one_a[0] + one_b[0]), 3),
                    "wall_a_s": round(one_a[1], 3),
                    "wall_b_s": round(one_b[1], 3),
                    "wall_both_s": round(both[1], 3),
                }
            )
    summary = {"cases": args.cases, "latency_s": args.latency, "parallel": args.parallel, "rounds": rounds,
               "median_ratio": statistics.median(r["ratio"] for r in rounds)}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    for r in rounds:
        print(f"A {r['cpu_a_s']:.2f}s + B {r['cpu_b_s']:.2f}s CPU vs A+B in one run {r['cpu_both_s']:.2f}s: {r['ratio']:.3f}x "
              f"(wall {r['wall_a_s']:.1f}s, {r['wall_b_s']:.1f}s, {r['wall_both_s']:.1f}s)")
    print(f"median ratio: {summary['median_ratio']:.3f}x (target <= 1.05)")


if __name__ == "__main__":
    main()
