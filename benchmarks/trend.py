"""Many runs as one dataset: the pass rate per agent per run over a results folder of 1000 runs.

Writes ``--runs`` run folders of ``--cases`` case runs each (two agents, each half the cases; a
``run.json`` with the start and the gate), with the farm's cases schema, then times, each
``--repeat`` times (the median shown; the files are in the page cache after the first):

- ``read_runs``: :func:`farm.results.read_runs` over the folder, and the pass rate per agent per
  run from the columns it needs (``farm report``'s trend, :func:`farm.reports.trend.trend`);
- DuckDB over the folder: ``read_parquet('<folder>/*/cases.parquet', union_by_name = true)``
  grouped by run and agent (no run.json: no start or verdict);
- DuckDB over the ``read_runs`` dataset, the same query.

    python benchmarks/trend.py [--runs 1000] [--cases 100] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from farm.reports.trend import trend  # noqa: E402
from farm.results import read_runs  # noqa: E402
from farm.writers import CASES_SCHEMA, write_run_json  # noqa: E402

AGENTS = ("bot", "other")


def write_runs(root: Path, runs: int, cases: int) -> None:
    """``runs`` run folders of ``cases`` case runs each; agent ``bot`` passes about 3 in 4, ``other`` 1 in 2."""
    for number in range(runs):
        run_id = f"20261206-{number:06d}"
        folder = root / run_id
        folder.mkdir(parents=True)
        agent = [AGENTS[index % 2] for index in range(cases)]
        passed = [(index // 2) % (4 if agent[index] == "bot" else 2) != 0 for index in range(cases)]
        columns = {
            "run_id": pa.array([run_id] * cases),
            "agent": pa.array(agent),
            "suite": pa.array(["suites/a.jsonl"] * cases),
            "case_id": pa.array([f"case-{index // 2:04d}" for index in range(cases)]),
            "run_index": pa.array([0] * cases, pa.int32()),
            "attempt": pa.array([1] * cases, pa.int16()),
            "status": pa.array(["passed" if ok else "failed" for ok in passed]),
            "source": pa.array([f"suites/a.jsonl:{index // 2 + 1}" for index in range(cases)]),
            "duration_ms": pa.array([float(index) for index in range(cases)]),
        }
        table = pa.table({name: columns.get(name, pa.nulls(cases, CASES_SCHEMA.field(name).type)) for name in CASES_SCHEMA.names})
        pq.write_table(table.cast(CASES_SCHEMA), folder / "cases.parquet", compression="zstd")
        gate = {"min_pass_rate": 0.5, "verdict": "passed", "sentence": "Gate passed."}
        write_run_json(folder, {"run_id": run_id, "status": "finished", "started_at": 1.8e9 + 60 * number, "agents": list(AGENTS), "gate": gate})


QUERY = """
    select run_id, agent, avg((status = 'passed')::int) as pass_rate
    from {source} where status != 'skipped' group by all order by all
"""


def timed(what, repeat: int) -> tuple[float, object]:
    took, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = what()
        took.append(time.perf_counter() - start)
    return statistics.median(took), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp) / "farm-results"
        start = time.perf_counter()
        write_runs(root, args.runs, args.cases)
        written = time.perf_counter() - start
        figures: dict[str, object] = {"runs": args.runs, "cases": args.cases, "write_s": round(written, 2)}
        took, points = timed(lambda: trend([root]), args.repeat)
        assert len(points) == args.runs * len(AGENTS)
        figures["read_runs_trend_s"] = round(took, 3)
        try:
            import duckdb
        except ImportError:
            duckdb = None
        if duckdb is not None:
            folder = f"read_parquet('{root}/*/cases.parquet', union_by_name = true)"
            took, rows = timed(lambda: duckdb.sql(QUERY.format(source=folder)).fetchall(), args.repeat)
            assert len(rows) == args.runs * len(AGENTS)  # type: ignore[arg-type]
            figures["duckdb_folder_s"] = round(took, 3)

            def over_dataset() -> list:
                cases = read_runs(root)  # noqa: F841  (DuckDB finds it by name)
                return duckdb.sql(QUERY.format(source="cases")).fetchall()

            took, rows = timed(over_dataset, args.repeat)
            assert len(rows) == args.runs * len(AGENTS)  # type: ignore[arg-type]
            figures["duckdb_read_runs_s"] = round(took, 3)
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{args.runs} runs x {args.cases} cases (written in {figures['write_s']} s); medians of {args.repeat}")
    print(f"  read_runs, pass rate per agent per run (farm report's trend): {figures['read_runs_trend_s']:.3f} s")
    if "duckdb_folder_s" in figures:
        print(f"  DuckDB over the folder's cases.parquet:                       {figures['duckdb_folder_s']:.3f} s")
        print(f"  DuckDB over the read_runs dataset:                             {figures['duckdb_read_runs_s']:.3f} s")


if __name__ == "__main__":
    main()
