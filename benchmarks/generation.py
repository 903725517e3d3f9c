"""Generation at scale: cases from a generator that behaves like an LLM, asked in parallel batches.

    python benchmarks/generation.py                      # 1000 cases, 25 a reply, 300 ms, max_concurrency 8
    python benchmarks/generation.py --memory 1000 10000  # the driver's memory, by cases generated
    python benchmarks/generation.py --json

The generator (``farm.demo.generator.LikeAnLLM``: at most 25 cases a reply, the same
cases for the same prompt, 1 in 20 malformed, ``--latency`` seconds a reply) runs
behind an OpenAI-compatible HTTP server in a child process; its connector has
``max_concurrency = --concurrency``. Reported, in the same run:

- **ideal**: batches ÷ concurrency × latency, batches = ⌈count ÷ batch⌉;
- **generation_s**: the stream from its start to its last case (``CaseStream.batches``
  drained with the local engine's role players), and ``vs_ideal``;
- **first_batch_s**: from the stream's start to its first accepted cases: when a
  streaming run can start its first case;
- **first_result_s**: the whole run (``farm.run``, local engine, a fast agent under test, the
  generated cases streaming into it): from the run's start (``run.json``'s ``started_at``) to
  its first result; ``first_result_from_call_s`` counts from the ``farm.run`` call instead
  (config, imports and checks before the run included);
- with ``--memory``: for each count, the peak RSS of a fresh process that generated
  that many cases (drained, as a streaming run hands them on), and its growth per case.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def serve(latency: float, per_reply: int, distinct: int) -> None:
    """The child process: the LLM-like generator and a fast agent under test, until stdin closes."""
    from farm.demo.agent import handle
    from farm.demo.generator import LikeAnLLM
    from farm.demo.server import JSONServer

    with JSONServer(LikeAnLLM(per_reply=per_reply, distinct=distinct, latency=latency)) as gen, JSONServer(handle) as agent:
        print(json.dumps({"generator": gen.url, "agent": agent.url}), flush=True)
        sys.stdin.read()


def project(folder: Path, urls: dict[str, str], concurrency: int) -> Path:
    toml = f"""
[farm]
default_agent = "target"
results_dir = "{folder / 'results'}"

[connectors.agent]
base_url = "{urls['agent']}/v1"
model = "demo"
max_concurrency = 64

[connectors.llm]
base_url = "{urls['generator']}/v1"
model = "like-an-llm"
max_concurrency = {concurrency}
timeout = "60s"

[agents.target]
kind = "openai"
connector = "agent"
tool_mocks = {{ create_expense = {{ expense = {{ id = "EXP-1", status = "draft" }} }} }}

[agents.gen]
kind = "generator"
connector = "llm"
"""
    path = folder / "farm.toml"
    path.write_text(toml)
    return path


def generate(config_path: Path, count: int, batch: int, seed: int) -> dict[str, Any]:
    """Drain one generation (no run), timing it."""
    import asyncio

    from farm.agents.transport import preload
    from farm.config import load_config
    from farm.inputs import resolve_input
    from farm.ratelimit import local_limiters
    from farm.roles.services import LocalRoles

    config = load_config(config_path)
    stream = resolve_input(f"agents:gen?count={count}&batch={batch}&seed={seed}", config, "target").feed.stream
    assert stream is not None

    preload()  # a run imports its HTTP client's transport at start-up: not generation's time

    async def drain() -> dict[str, Any]:
        roles = LocalRoles(config, limiter_for=local_limiters(config))
        start = time.perf_counter()
        first = None
        try:
            async for _cases in stream.batches(roles.generate):
                first = first if first is not None else time.perf_counter() - start
        finally:
            await roles.aclose()
        return {"generation_s": time.perf_counter() - start, "first_batch_s": first}

    out = asyncio.run(drain())
    stats = stream.stats
    out.update(kept=stats.kept, batches=stats.batches, calls=stats.calls, malformed=stats.malformed, duplicates=stats.duplicates, renamed=stats.renamed)
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def whole_run(config_path: Path, count: int, batch: int, seed: int) -> dict[str, Any]:
    import farm

    start = time.time()
    result = farm.run(f"agents:gen?count={count}&batch={batch}&seed={seed}", config=str(config_path), engine="local", quiet=True, cache=False)
    assert result.run_dir is not None
    info = json.loads((result.run_dir / "run.json").read_text())
    first = info["timings"]["first_result_s"]
    return {"first_result_s": first, "first_result_from_call_s": info["started_at"] + first - start, "run_total": info["counts"].get("total"), "run_generated": info["generation"]["kept"]}


def child(args: argparse.Namespace, urls: dict[str, str], count: int, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="farm-gen-bench-") as tmp:
        config_path = project(Path(tmp), urls, args.concurrency)
        code = (
            f"import sys, json; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); import generation as g; from pathlib import Path; "
            f"print(json.dumps(g.{mode}(Path({str(config_path)!r}), {count}, {args.batch}, {args.seed})))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--per-reply", type=int, default=25)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--memory", type=int, nargs="*", help="counts to measure the driver's memory at (e.g. 1000 10000)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--distinct", type=int, default=1_000_000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency, args.per_reply, args.distinct)
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency", str(args.latency), "--per-reply", str(args.per_reply)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        urls = json.loads(server.stdout.readline())
        batches = math.ceil(args.count / min(args.batch, args.per_reply))
        ideal = batches / args.concurrency * args.latency
        rows = []
        for _ in range(args.repeat):
            row = {"count": args.count, "ideal_s": round(ideal, 3)}
            row.update(child(args, urls, args.count, "generate"))
            row["vs_ideal"] = round(row["generation_s"] / ideal, 2)
            row.update(child(args, urls, args.count, "whole_run"))
            rows.append(row)
            args.seed += 1  # a new suite each repeat: no role cache to answer it
        memory = []
        for count in args.memory or []:
            memory.append({"count": count, **child(args, urls, count, "generate")})
        if len(memory) > 1:
            first, last = memory[0], memory[-1]
            growth = (last["peak_rss_mib"] - first["peak_rss_mib"]) * 1024 * 1024 / (last["count"] - first["count"])
            memory.append({"rss_bytes_per_case": round(growth)})
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    if args.json:
        print(json.dumps({"runs": rows, "memory": memory}))
        return
    for row in rows:
        print(
            f"{row['count']} cases: generation {row['generation_s']:.2f} s (ideal {row['ideal_s']:.2f} s, {row['vs_ideal']}x), "
            f"first batch {row['first_batch_s']:.2f} s, first result {row['first_result_s']:.2f} s after the run's start "
            f"({row['first_result_from_call_s']:.2f} s after the call); "
            f"{row['batches']} batches, {row['calls']} calls, {row['malformed']} malformed, {row['duplicates']} duplicates, {row['renamed']} renamed; "
            f"the run: {row['run_total']} cases, {row['run_generated']} generated"
        )
    for row in memory:
        print(row)


if __name__ == "__main__":
    main()
