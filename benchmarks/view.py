"""``farm view`` over a 100,000-case run: time to serve the run page's first screen and filtered
pages, and the server's memory.

Writes a run folder with the farm's table schemas (``--cases`` case runs, ``--turns`` turns each,
a quarter of them failed, replies of a few hundred characters), starts ``farm view`` on it in a
child process, and asks for what the pages ask for, over HTTP on 127.0.0.1:

- the run page's first screen: ``/api/runs/<run>`` and the first 50 cases, the first time after
  start (cold: the listing columns are read) and again (warm);
- filtered pages: failed cases, a tag, an agent, page 100 sorted by duration, and a text search
  over inputs and replies (cold, then the next page of the same search);
- a case page, and the compare page of two such runs.

The baseline, measured in the same run: reading the cases table's listing columns with
``pyarrow.parquet.read_table`` in this process (what any reader of the run must do once).
Memory: the server's peak resident set (``VmHWM``) after all of it.

With DuckDB installed (the ``[test]`` extra), the same first screen, filtered page and text
search are also timed as DuckDB SQL over the Parquet files, each query on its own (DuckDB keeps
no table between queries, so each is a scan): the figures behind choosing pyarrow.

    python benchmarks/view.py [--cases 100000] [--turns 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from farm.view.cases import LISTED  # noqa: E402
from farm.writers import ASSERTIONS_SCHEMA, CASES_SCHEMA, TURNS_SCHEMA, write_run_json  # noqa: E402
from farm.writers.runinfo import RunInfo  # noqa: E402

STATUSES = ["passed", "passed", "failed", "passed", "error", "passed", "timeout", "skipped"]


def write_run(folder: Path, run_id: str, cases: int, turns: int, shift: int) -> None:
    """A finished run of ``cases`` case runs with ``turns`` turns each."""
    folder.mkdir(parents=True)
    ids = [f"case-{n:06d}" for n in range(cases)]
    status = [STATUSES[(n + shift) % len(STATUSES)] for n in range(cases)]
    started = pa.array([1_767_261_600_000 + n for n in range(cases)], pa.timestamp("ms", tz="UTC"))
    columns = {
        "run_id": [run_id] * cases, "run_index": [0] * cases, "attempt": [1] * cases, "case_id": ids,
        "name": [f"Case number {n}" for n in range(cases)], "status": status, "mode": ["static"] * cases,
        "agent": ["bot-a" if n % 2 else "bot-b" for n in range(cases)],
        "tags": [["smoke"] if n % 10 == 0 else ["regression", f"area-{n % 7}"] for n in range(cases)],
        "source": [f"/suites/big.jsonl:{n + 1}" for n in range(cases)], "total_turns": [turns] * cases,
        "duration_ms": [float((n * 7919) % 5000) for n in range(cases)],
        "error": [None if s in ("passed", "skipped") else f"turn 2: contains: the reply lacks 'refund' (case {n})" for n, s in enumerate(status)],
        "started_at": started,
    }  # fmt: skip
    table = pa.table({name: columns.get(name, pa.nulls(cases, CASES_SCHEMA.field(name).type)) for name in CASES_SCHEMA.names})
    pq.write_table(table.cast(CASES_SCHEMA), folder / "cases.parquet", compression="zstd", row_group_size=100_000)
    rows = cases * turns
    reply = "Thanks for asking. " * 12
    turn_columns = {
        "run_id": [run_id] * rows, "run_index": [0] * rows, "attempt": [1] * rows,
        "case_id": [ids[n // turns] for n in range(rows)], "turn": [n % turns + 1 for n in range(rows)],
        "input": [f"question {n % turns} of case {n // turns} about order {n * 31 % 99991}" for n in range(rows)],
        "input_source": ["static"] * rows, "output": [f"{reply}Order {n * 31 % 99991} is on its way." for n in range(rows)],
        "tool_calls": [[]] * rows, "awaiting_input": [False] * rows, "awaiting_reason": ["completed"] * rows,
        "duration_ms": [float(n % 900) for n in range(rows)],
    }  # fmt: skip
    turns_table = pa.table({name: turn_columns.get(name, pa.nulls(rows, TURNS_SCHEMA.field(name).type)) for name in TURNS_SCHEMA.names})
    pq.write_table(turns_table.cast(TURNS_SCHEMA), folder / "turns.parquet", compression="zstd", row_group_size=100_000)
    pq.write_table(ASSERTIONS_SCHEMA.empty_table(), folder / "assertions.parquet")
    counts = {"total": cases, **{name: status.count(name) for name in ("passed", "failed", "skipped", "error", "timeout")}}
    write_run_json(folder, RunInfo(run_id=run_id, status="finished", engine="ray", started_at=1_767_261_600.0 + shift,
                                   ended_at=1_767_261_900.0 + shift, input="/suites/big.jsonl", cases=cases, counts=counts))  # fmt: skip


def fetch(url: str) -> tuple[float, int]:
    """Milliseconds to fetch ``url`` whole, and its size."""
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return (time.perf_counter() - start) * 1000, len(body)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _duckdb(root: Path, repeat: int) -> dict[str, float]:
    """The same questions as DuckDB SQL over the files, each query alone (median of ``repeat``)."""
    try:
        import duckdb
    except ImportError:
        return {}
    cases, turns = root / "run-a" / "cases.parquet", root / "run-a" / "turns.parquet"
    listed = "run_index, attempt, case_id, name, status, agent, tags, total_turns, duration_ms, error, started_at"
    queries = {
        "duckdb: first screen (ms)": f"select {listed} from '{cases}' order by case_id limit 50",
        "duckdb: failed cases (ms)": f"select {listed} from '{cases}' where status in ('failed', 'error', 'timeout') order by case_id limit 50",
        "duckdb: text search (ms)": (
            f"select {listed} from '{cases}' where case_id in (select case_id from '{turns}' "
            "where input ilike '%order 4242%' or output ilike '%order 4242%') order by case_id limit 50"
        ),
    }
    out = {}
    connection = duckdb.connect()
    for name, sql in queries.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            connection.execute(sql).fetchall()
            times.append((time.perf_counter() - start) * 1000)
        out[name] = round(statistics.median(times), 1)
    connection.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="warm requests per figure (the median is shown)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="farm-view-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        write_run(root / "run-a", "run-a", args.cases, args.turns, 0)
        write_run(root / "run-b", "run-b", args.cases, args.turns, 1)
        written_s = time.perf_counter() - started
        start = time.perf_counter()
        pq.read_table(root / "run-a" / "cases.parquet", columns=[name for name in LISTED if name in CASES_SCHEMA.names])
        baseline_ms = (time.perf_counter() - start) * 1000

        child = subprocess.Popen(
            [sys.executable, "-m", "farm.cli", "view", str(root), "--port", "0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            url = line.split()[2].rstrip("/")
            api = f"{url}/api/runs/run-a"
            figures: dict[str, float] = {}

            def timed(name: str, path: str, repeat: int = 1) -> None:
                times = [fetch(path)[0] for _ in range(repeat)]
                figures[name] = round(statistics.median(times), 1)

            first = fetch(api)[0] + fetch(f"{api}/cases?limit=50")[0]
            figures["first screen, cold (ms)"] = round(first, 1)
            timed("first screen, warm (ms)", f"{api}/cases?limit=50", args.repeat)
            timed("failed cases (ms)", f"{api}/cases?status=failed,error,timeout&limit=50", args.repeat)
            timed("a tag (ms)", f"{api}/cases?tag=area-3&limit=50", args.repeat)
            timed("an agent, failed (ms)", f"{api}/cases?agent=bot-a&status=failed&limit=50", args.repeat)
            timed("page 100 by duration (ms)", f"{api}/cases?sort=duration_ms&desc=1&offset=4950&limit=50", args.repeat)
            timed("text search, cold (ms)", f"{api}/cases?q=order+4242&limit=50")
            timed("text search, next page (ms)", f"{api}/cases?q=order+4242&limit=50&offset=50", args.repeat)
            timed("a case (ms)", f"{api}/cases/case-004242", args.repeat)
            timed("compare two runs, cold (ms)", f"{url}/api/compare?a=run-a&b=run-b&limit=100")
            timed("compare two runs, warm (ms)", f"{url}/api/compare?a=run-a&b=run-b&limit=100", args.repeat)
            timed("runs list (ms)", f"{url}/api/runs", args.repeat)
            memory = peak_rss_mb(child.pid)
        finally:
            child.terminate()
            child.wait(timeout=30)
        duck = _duckdb(root, args.repeat)
    report: dict[str, float | int] = {
        "cases": args.cases,
        "turns": args.cases * args.turns,
        "write the two runs (s)": round(written_s, 1),
        "baseline: read the listing columns (ms)": round(baseline_ms, 1),
        **figures,
        "first screen cold / baseline": round(figures["first screen, cold (ms)"] / baseline_ms, 2),
        "server peak RSS (MB)": round(memory, 1),
        **duck,
    }
    if args.json:
        print(json.dumps(report))
    else:
        width = max(len(name) for name in report)
        for name, value in report.items():
            print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
