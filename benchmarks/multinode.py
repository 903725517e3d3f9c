"""Multi-node behaviour on one machine: several raylets (``ray.cluster_utils.Cluster``).

    python benchmarks/multinode.py --nodes 3 --cases 300 --remove-node-after 100 --json
    python benchmarks/multinode.py --speedup --nodes 3 --cases 2000
    python benchmarks/multinode.py --cpu-agent --nodes 2 --cases 600 --work-ms 10
    python benchmarks/multinode.py --placement

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

``--cpu-agent`` runs a CPU-bound python agent (``--work-ms`` of CPU per reply) that
declares ``resources = { num_cpus = 1 }`` as a user would: ``farm test --address``
in a subprocess, on 1 and on ``--nodes`` worker nodes of one CPU each (a head with
none); it reports the cases phase from ``run.json``'s ``timings`` (first case
started to last result), the speedup, and where the cases ran. With
``--remove-node-after N`` a worker node is removed from the ``--nodes`` cluster
once N results are written, and the report says whether anything was lost.

``--placement`` checks where the farm puts its session actors, on one cluster (a
head with no CPUs, a one-CPU node with one logical GPU, a one-CPU node): an
agent that declares ``num_cpus = 1``, one that declares ``num_gpus = 1``, one that
declares nothing, and one that asks for two GPUs (refused before any case runs).

Each mode builds its own cluster in this process, in a private temp folder
(``RAY_TMPDIR``), so that it never touches another Ray on the machine; run it
as a script or a subprocess, not inside a process that already uses Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
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
    from farm.suite.loader import parse_cases

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
            if info.get("ActorClassName") != "SessionActor":
                continue
            pid, node = info.get("Pid"), (info.get("Address") or {}).get("NodeID")
            if pid and node:
                self.node_of.setdefault(int(pid), node)  # a dead actor keeps its pid and node in the table
                if info.get("State") == "ALIVE":
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


def run_once(args: argparse.Namespace, nodes: int, remove_after: int | None, cluster: Any = None) -> dict[str, Any]:
    """One run, on a cluster of its own (or on ``cluster``, left running); returns what happened as a dict."""
    import ray
    from fake_agent import FakeAgent, config_toml
    from farm.actors.driver import run_plan

    from farm.config import load_config
    from farm.conversation.settings import RunSettings
    from farm.engines import RunPlan

    started = time.monotonic()
    own = cluster is None
    if own:
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
        if own:
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


CPU_AGENT = """
import time

WORK = {work}


def reply(messages, options):
    # CPU of this thread, not wall time: the work is the same however the cores are shared
    end = time.thread_time() + WORK
    while time.thread_time() < end:
        sum(range(200))
    return "computed"
"""


def _cpu_project(folder: Path, work_ms: float, resources: str, cases: int) -> Path:
    (folder / "cpu_agent.py").write_text(CPU_AGENT.format(work=work_ms / 1000))
    (folder / "farm.toml").write_text(
        f'[farm]\ndefault_agent = "heavy"\nresults_dir = "results"\n\n'
        f'[agents.heavy]\nkind = "python"\nentry = "cpu_agent:reply"\nresources = {resources}\n'
    )
    suite = folder / "suite.jsonl"
    check = [{"type": "contains", "value": "computed"}]
    suite.write_text("".join(json.dumps({"id": f"c{i:05d}", "input": "work", "assertions": check}) + "\n" for i in range(cases)))
    return suite


def _node_of_results(rows: list[dict[str, Any]], pids: PidMap, head_id: str) -> dict[str, int]:
    per_node: Counter[str] = Counter()
    for row in rows:
        worker = row.get("worker") or ""
        pid = int(worker.rsplit(":", 1)[1]) if ":" in worker else None
        node = pids.node_of.get(pid) if pid is not None else None
        per_node["unknown" if node is None else "head" if node == head_id else node[:8]] += 1
    return dict(per_node)


def cpu_run(args: argparse.Namespace, nodes: int, remove_after: int | None) -> dict[str, Any]:
    """``farm test --address`` with the CPU-bound agent on a cluster of ``nodes`` one-CPU worker nodes."""
    import ray

    load_before = round(os.getloadavg()[0], 2)
    started = time.monotonic()
    cluster = _start_cluster(nodes, 0, 1, args.health_check_ms)
    startup = time.monotonic() - started
    head_id = cluster.head_node.node_id
    workers_by_id = {node.node_id: node for node in cluster.worker_nodes}
    folder = Path(tempfile.mkdtemp(prefix="cpu-", dir=os.environ["RAY_TMPDIR"]))
    suite = _cpu_project(folder, args.work_ms, "{ num_cpus = 1 }", args.cases)
    pids = PidMap().start()
    removed: dict[str, Any] = {}
    try:
        command = [sys.executable, "-m", "farm.cli", "test", "-i", str(suite), "--address", cluster.address]
        t0 = time.monotonic()
        proc = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if remove_after is not None:
            while proc.poll() is None:
                written = list((folder / "results").glob("*/results.jsonl"))
                if written and len(written[0].read_text().splitlines()) >= remove_after:
                    pids.sample()
                    placement = {n: len(a) for n, a in pids.actors_on.items() if n in workers_by_id}
                    victim = max(placement, key=placement.__getitem__) if placement else next(iter(workers_by_id))
                    doomed = [pid for pid, node in pids.node_of.items() if node == victim]
                    for pid in doomed:  # the session actors on that node, by pid, as a dying machine takes them
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    cluster.remove_node(workers_by_id[victim], allow_graceful=False)
                    removed = {"node": victim[:8], "after_results": len(written[0].read_text().splitlines()), "at_s": round(time.monotonic() - t0, 2), "killed_pids": doomed}
                    break
                time.sleep(0.05)
        output, _ = proc.communicate(timeout=900)
        wall = time.monotonic() - t0
        pids.stop()
        written = list((folder / "results").glob("*/run.json"))
        if not written:
            raise SystemExit(f"farm test wrote no run (exit {proc.returncode}):\n{output}")
        run_dir = written[0].parent
        info = json.loads((run_dir / "run.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    finally:
        ray.shutdown()
        cluster.shutdown()
    timings = info.get("timings", {})
    ids = Counter(row["id"] for row in rows)
    cases_phase = timings.get("last_result_s", 0.0) - timings.get("cases_started_s", 0.0)
    return {
        "nodes": nodes,
        "cases": args.cases,
        "work_ms": args.work_ms,
        "exit_code": proc.returncode,
        "startup_s": round(startup, 2),
        "command_s": round(wall, 2),
        "cases_phase_s": round(cases_phase, 3),
        "after_first_result_s": round(timings.get("last_result_s", 0.0) - timings.get("first_result_s", 0.0), 3),
        "timings": timings,
        "results": len(rows),
        "unique": len(ids),
        "duplicates": sum(c - 1 for c in ids.values() if c > 1),
        "missing": args.cases - len(ids),
        "statuses": dict(Counter(row["status"] for row in rows)),
        "max_attempt": max((row.get("attempt", 1) for row in rows), default=0),
        "processes": len({row.get("worker") for row in rows}),
        "cases_per_node": _node_of_results(rows, pids, head_id),
        "actors_per_node": {("head" if n == head_id else n[:8]): len(a) for n, a in pids.actors_on.items()},
        "removed": removed or None,
        "engine": info.get("engine"),
        "load_before": load_before,
        "worker_niceness": args.worker_niceness,
        "errors": sorted({row["error"] for row in rows if row.get("error")})[:3],
    }


def placement(args: argparse.Namespace) -> dict[str, Any]:
    """Where the session actors go for agents that declare a CPU, a GPU, nothing, or the impossible."""
    import ray
    from ray.cluster_utils import Cluster

    from farm.api import run
    from farm.errors import UsageError

    node_args: dict[str, Any] = dict(include_dashboard=False, object_store_memory=80 * 1024 * 1024)
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, **node_args))
    gpu_node = cluster.add_node(num_cpus=1, num_gpus=1, **node_args)
    cpu_node = cluster.add_node(num_cpus=1, **node_args)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="farm-multinode", log_to_driver=False, logging_level="ERROR")
    names = {gpu_node.node_id: "gpu", cpu_node.node_id: "cpu", cluster.head_node.node_id: "head"}
    report: dict[str, Any] = {}
    try:
        for label, resources in (("num_cpus", "{ num_cpus = 1 }"), ("num_gpus", "{ num_gpus = 1 }"), ("none", "{}"), ("impossible", "{ num_gpus = 2 }")):
            folder = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=os.environ["RAY_TMPDIR"]))
            suite = _cpu_project(folder, 1.0, resources, args.cases)
            pids = PidMap().start()
            t0 = time.monotonic()
            try:
                result = run(str(suite), config=folder / "farm.toml", address=cluster.address, parallel=8, quiet=True, skip_interactive=True)
            except UsageError as exc:
                pids.stop()
                report[label] = {"usage_error": str(exc), "seconds": round(time.monotonic() - t0, 2)}
                continue
            pids.stop()
            rows = [json.loads(line) for line in (Path(result.run_dir) / "results.jsonl").read_text().splitlines()]
            per_node: Counter[str] = Counter()
            for row in rows:
                pid = int(row["worker"].rsplit(":", 1)[1])
                per_node[names.get(pids.node_of.get(pid, ""), "unknown")] += 1
            processes = {int(row["worker"].rsplit(":", 1)[1]) for row in rows}
            actors = Counter(names.get(pids.node_of.get(pid, ""), "unknown") for pid in processes)
            report[label] = {
                "exit_code": result.exit_code,
                "results": len(rows),
                "unique": len({row["id"] for row in rows}),
                "cases_per_node": dict(per_node),
                "processes": len({row["worker"] for row in rows}),
                "actors_per_node": dict(actors),
            }
            # a session actor outlives its run only until ray.kill lands; let the next run see its own
            time.sleep(0.5)
        if args.remove_node_after is not None:  # then a node lost mid-run, on the same cluster
            loss = argparse.Namespace(**{**vars(args), "cases": args.node_loss_cases or args.cases})
            report["node_loss"] = run_once(loss, len(cluster.worker_nodes), args.remove_node_after, cluster=cluster)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return {"mode": "placement", "cases": args.cases, **report}


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
    parser.add_argument("--cpu-agent", action="store_true", help="a CPU-bound python agent declaring num_cpus = 1, via farm test --address, on 1 and --nodes worker nodes")
    parser.add_argument("--work-ms", type=float, default=10.0, help="the CPU agent's milliseconds of CPU per reply")
    parser.add_argument(
        "--placement", action="store_true",
        help="where session actors go for CPU, GPU, plain and impossible agents (with --remove-node-after, then a node lost mid-run on that cluster)",
    )
    parser.add_argument(
        "--worker-niceness", type=int, default=None,
        help="niceness of Ray's worker processes (Ray's default: 15; on a machine shared with busy processes at 0, "
        "a CPU-bound agent at 15 gets next to no CPU, whatever the nodes)",
    )
    parser.add_argument("--node-loss-cases", type=int, default=None, help="with --placement: the cases of the node-loss run (default: --cases)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    # Ray prints node deaths ("Raylet is terminated ...") on stdout: keep stdout for the report
    report_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    base = private_ray_env("farm-mn-")
    if args.worker_niceness is not None:
        os.environ["RAY_worker_niceness"] = str(args.worker_niceness)
    # the cluster's worker processes import the farm from this checkout, as this process does
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    report: dict[str, Any]
    try:
        if args.placement:
            report = placement(args)
        elif args.cpu_agent:
            one = cpu_run(args, 1, None)
            many = cpu_run(args, args.nodes, args.remove_node_after)
            speedup = one["cases_phase_s"] / many["cases_phase_s"] if many["cases_phase_s"] else 0.0
            steady = one["after_first_result_s"] / many["after_first_result_s"] if many["after_first_result_s"] else 0.0
            report = {
                "mode": "cpu-agent",
                "one_node": one,
                "n_nodes": many,
                "cases_phase_speedup": round(speedup, 2),
                "after_first_result_speedup": round(steady, 2),
            }
        elif args.speedup:
            one = run_once(args, 1, None)
            many = run_once(args, args.nodes, None)
            report = {"mode": "speedup", "one_node": one, "n_nodes": many, "speedup": round(one["wall_s"] / many["wall_s"], 2)}
        else:
            report = {"mode": "node-loss", **run_once(args, args.nodes, args.remove_node_after)}
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(report) if args.json else json.dumps(report, indent=2), file=report_out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
