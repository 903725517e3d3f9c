"""Multi-node behaviour on one machine: several raylets (``ray.cluster_utils.Cluster``).

    python benchmarks/multinode.py --nodes 3 --cases 300 --remove-node-after 100 --json
    python benchmarks/multinode.py --speedup --nodes 3 --cases 2000

The default mode starts a head and ``--nodes`` worker nodes, runs a suite with
:func:`farm.actors.driver.run_plan` (session actors are placed with SPREAD), removes
the worker node that hosts the most session actors once ``--remove-node-after``
results are in, and reports where the cases ran: cases per node (a result's
``worker`` is ``name@ip:pid``; on one machine every ip is the same, so pids are
mapped to nodes from Ray's actor table, sampled during the run), duplicates,
missing cases and attempts > 1. ``actors_per_node`` counts every session actor
process seen on a node during the run (restarts included); the node removal
also kills that node's actor processes by pid, as a machine that dies would.

``--speedup`` runs the same workload on a cluster of 1 worker node and on one
of ``--nodes`` worker nodes (no node removed) and reports the wall times.

Each mode builds its own cluster in this process, in a private temp folder
(``RAY_TMPDIR``), so that it never touches another Ray on the machine; run it
as a script or a subprocess, not inside a process that already uses Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from private_ray import private_ray_env  # noqa: E402  (beside this script)


def _suite(n: int, turns: int) -> list[Any]:
    from farm.loader import parse_cases

    def case(i: int) -> dict[str, Any]:
        check = [{"type": "contains", "value": "fake agent"}]
        if turns == 1:
            return {"id": f"c{i:06d}", "input": "Hello", "assertions": check}
        return {"id": f"c{i:06d}", "turns": [{"input": f"Turn {t}", "assertions": check} for t in range(turns)]}

    return parse_cases([(f"bench:{i}", case(i)) for i in range(n)])


class PidMap:
    """Which node each actor process ran on: Ray's actor table, sampled until stopped
    (an actor restarted on another node gets a new pid; the old one is kept)."""

    def __init__(self, every: float = 0.25):
        self.node_of: dict[int, str] = {}
        self.actors_on: dict[str, set[str]] = {}
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        from ray._private import state

        for info in state.actors().values():
            if info.get("State") != "ALIVE" or info.get("ActorClassName") != "SessionActor":
                continue
            pid, node = info.get("Pid"), (info.get("Address") or {}).get("NodeID")
            if pid and node:
                self.node_of[int(pid)] = node
                self.actors_on.setdefault(node, set()).add(info.get("Name") or info.get("ActorID"))

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.sample()
            except Exception:  # the GCS is busy or shutting down: try again next round
                pass

    def start(self) -> PidMap:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.sample()
        except Exception:
            pass


def _start_cluster(nodes: int, head_cpus: int, cpus_per_node: int, health_check_ms: int | None) -> Any:
    import ray
    from ray.cluster_utils import Cluster

    node_args: dict[str, Any] = dict(include_dashboard=False, object_store_memory=80 * 1024 * 1024)
    head_args: dict[str, Any] = dict(num_cpus=head_cpus, **node_args)
    if health_check_ms:
        # how soon the GCS declares a silent node dead (Ray's default: 3 s x 5 missed checks)
        head_args["_system_config"] = {"health_check_period_ms": health_check_ms, "health_check_failure_threshold": 3}
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    for _ in range(nodes):
        cluster.add_node(num_cpus=cpus_per_node, **node_args)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="farm-multinode", log_to_driver=False, logging_level="ERROR")
    return cluster


def run_once(args: argparse.Namespace, nodes: int, remove_after: int | None) -> dict[str, Any]:
    """One cluster, one run; returns what happened as a dict."""
    import ray
    from fake_agent import FakeAgent, config_toml
    from farm.actors.driver import run_plan

    from farm.config import load_config
    from farm.engines import RunPlan
    from farm.runner import RunSettings

    started = time.monotonic()
    cluster = _start_cluster(nodes, args.head_cpus, args.cpus_per_node, args.health_check_ms)
    startup = time.monotonic() - started
    workers_by_id = {node.node_id: node for node in cluster.worker_nodes}
    head_id = cluster.head_node.node_id
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=os.environ["RAY_TMPDIR"]))
    try:
        with FakeAgent(args.latency) as agent:
            (folder / "farm.toml").write_text(config_toml(agent.url, max_concurrency=args.max_concurrency))
            config = load_config(folder / "farm.toml")
            plan = RunPlan(
                config=config,
                cases=_suite(args.cases, args.turns),
                settings=RunSettings(agent_id="target", run_id=f"multinode-{nodes}"),
                parallel=args.parallel,
                actors=args.actors or None,
            )
            results: list[Any] = []
            removed: dict[str, Any] = {}
            pids = PidMap().start()

            def remove_busiest_worker() -> None:
                # a machine that dies takes its worker processes with it; remove_node alone
                # kills the raylet and leaves the actor processes running until they notice
                pids.sample()
                placement = {n: len(a) for n, a in pids.actors_on.items()}
                candidates = {n: k for n, k in placement.items() if n in workers_by_id}
                victim = max(candidates, key=candidates.get) if candidates else next(iter(workers_by_id))
                doomed = [pid for pid, node in pids.node_of.items() if node == victim]
                removed.update(
                    node=victim,
                    triggered_after_results=remove_after,
                    actors_per_node_before={("head" if n == head_id else n[:8]): k for n, k in placement.items()},
                    killed_pids=doomed,
                    after_results=len(results),
                    at_s=round(time.monotonic() - t0, 2),
                )
                for pid in doomed:  # the session actors this script started, by pid
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                cluster.remove_node(workers_by_id[victim], allow_graceful=False)

            remover = threading.Thread(target=remove_busiest_worker, daemon=True)

            timeline: list[float] = []

            def on_result(result: Any) -> None:
                results.append(result)
                timeline.append(time.monotonic() - t0)
                if remove_after is not None and len(results) == remove_after:
                    remover.start()

            t0 = time.monotonic()
            run_plan(plan, on_result)
            wall = time.monotonic() - t0
            pids.stop()
            if remover.ident is not None:  # it was started
                remover.join(timeout=30)
    finally:
        ray.shutdown()
        cluster.shutdown()

    ids = Counter(r.id for r in results)
    per_node: Counter[str] = Counter()
    unknown = 0
    for r in results:
        pid = int(r.worker.rsplit(":", 1)[1]) if r.worker and ":" in r.worker else None
        node = pids.node_of.get(pid) if pid is not None else None
        if node is None:
            unknown += 1
        else:
            per_node["head" if node == head_id else node[:8]] += 1
    return {
        "nodes": nodes,
        "head_cpus": args.head_cpus,
        "cases": args.cases,
        "turns": args.turns,
        "latency_s": args.latency,
        "parallel": args.parallel,
        "startup_s": round(startup, 2),
        "wall_s": round(wall, 3),
        "results": len(results),
        "unique": len(ids),
        "duplicates": sum(c - 1 for c in ids.values() if c > 1),
        "missing": args.cases - len(ids),
        "statuses": dict(Counter(str(r.status) for r in results)),
        "attempts_gt1": sum(1 for r in results if r.attempt > 1),
        "max_attempt": max((r.attempt for r in results), default=0),
        "cases_per_node": dict(per_node),
        "cases_on_unknown_node": unknown,
        "nodes_used": len(per_node),
        "distinct_pids": len({r.worker for r in results}),
        "actors_per_node": {("head" if n == head_id else n[:8]): len(a) for n, a in pids.actors_on.items()},
        "removed": ({**removed, "node": removed["node"][:8]} if removed else None),
        "errors": sorted({r.error for r in results if r.error})[:5],
        "results_per_second": [sum(1 for t in timeline if int(t) == s) for s in range(int(wall) + 1)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=3, help="worker nodes besides the head")
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--turns", type=int, default=1, help="turns per conversation")
    parser.add_argument("--latency", type=float, default=0.2, help="the fake agent's seconds per reply")
    parser.add_argument("--parallel", type=int, default=60)
    parser.add_argument("--actors", type=int, default=0, help="session actors (0: the farm's default for the cluster)")
    parser.add_argument("--max-concurrency", type=int, default=None, help="the connector's max_concurrency (the limiter on)")
    parser.add_argument("--head-cpus", type=int, default=0)
    parser.add_argument("--cpus-per-node", type=int, default=1)
    parser.add_argument("--remove-node-after", type=int, default=None, help="remove the busiest worker node after this many results")
    parser.add_argument("--health-check-ms", type=int, default=None, help="GCS health-check period (default: Ray's, 3000 ms x 5 misses)")
    parser.add_argument("--speedup", action="store_true", help="the same workload on 1 worker node and on --nodes worker nodes")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    # Ray prints node deaths ("Raylet is terminated ...") on stdout: keep stdout for the report
    report_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    base = private_ray_env("farm-mn-")
    try:
        if args.speedup:
            one = run_once(args, 1, None)
            many = run_once(args, args.nodes, None)
            report: dict[str, Any] = {"mode": "speedup", "one_node": one, "n_nodes": many, "speedup": round(one["wall_s"] / many["wall_s"], 2)}
        else:
            report = {"mode": "node-loss", **run_once(args, args.nodes, args.remove_node_after)}
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2), file=report_out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
