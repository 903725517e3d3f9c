"""Many runs as one dataset (``farm.results.read_runs``): one table of every run, each row with its
run's start and gate verdict, columns of older schemas unified, and filters that skip a run's files
unopened. Runs are written by the farm's own writers; one is kept as an older farm wrote it."""

from __future__ import annotations

import importlib.util
import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import farm.results
from farm.errors import UsageError
from farm.results import CASE_RUN_KEY, CaseResult, SpanRecord, Status, TurnResult, read_run, read_runs
from farm.results._dataset import RUN_COLUMNS, RUN_STARTED_AT, RUN_VERDICT
from farm.writers import CASES_SCHEMA, JSONLWriter, ParquetWriter, write_run_json
from tests.factories import case_result

SCHEMA6 = Path(__file__).parent / "data" / "schema6"
"""A run folder the farm wrote at results schema 6, before every table had ``suite`` (it has no
``trace_id`` either): two agents, three cases of one suite; bot passes 2 of 3, other 1 of 3."""


def write_run(folder: Path, run_id: str, passes: dict[str, list[bool]], *, started: float = 1.7e9, verdict: str | None = "passed", spans: bool = False, finish: bool = True) -> Path:
    """A run of ``passes``: per agent, whether each case (``c0``, ``c1``, …) passed."""
    results: list[CaseResult] = []
    for agent, outcomes in passes.items():
        for number, ok in enumerate(outcomes):
            span = [SpanRecord(name="tool", trace_id="t" * 32, span_id="s" * 16, start=0.0, duration_ms=1.0, turn=1)] if spans else []
            turn = TurnResult(turn=1, input="hi", output="hello", duration_ms=5.0, spans=span)
            results.append(case_result(f"c{number}", Status.PASSED if ok else Status.FAILED, [turn], run_id=run_id, agent=agent, source=f"suites/a.jsonl:{number + 1}"))
    with JSONLWriter(folder / "results.jsonl") as jsonl:
        parquet = ParquetWriter(folder)
        for result in results:
            jsonl.write(result)
            parquet.write(result)
        parquet.close() if finish else parquet.flush()
    gate = {"min_pass_rate": 0.5, "verdict": verdict, "sentence": f"Gate {verdict}."} if verdict else None
    write_run_json(folder, {"run_id": run_id, "status": "finished" if finish else "running", "started_at": started, "agents": list(passes), "agent": next(iter(passes)), "gate": gate})
    return folder


def pass_rates(dataset: ds.Dataset) -> dict[tuple[str, str], float]:
    """The pass rate per run per agent, as ``farm report``'s trend and docs/results.md compute it."""
    table = dataset.to_table(columns=["run_id", "agent", "status"])
    table = table.append_column("passed", pc.cast(pc.equal(table["status"], "passed"), pa.int64()))
    grouped = table.group_by(["run_id", "agent"]).aggregate([("passed", "mean")])
    return {(row["run_id"], row["agent"]): row["passed_mean"] for row in grouped.to_pylist()}


def test_three_runs_of_two_agents_read_as_one_table_with_each_agents_pass_rate_per_run(tmp_path: Path):
    write_run(tmp_path / "r1", "r1", {"bot": [True, True, False, False], "other": [False, False, False, False]}, started=1.7e9)
    write_run(tmp_path / "r2", "r2", {"bot": [True, True, True, False], "other": [True, False, False, False]}, started=1.7e9 + 60, verdict="failed")
    write_run(tmp_path / "r3", "r3", {"bot": [True, True, True, True], "other": [True, True, False, False]}, started=1.7e9 + 120)
    cases = read_runs(tmp_path)
    assert isinstance(cases, ds.Dataset) and cases.schema.names == [*CASES_SCHEMA.names, *RUN_COLUMNS.names]
    assert pass_rates(cases) == {
        ("r1", "bot"): 0.5, ("r1", "other"): 0.0,
        ("r2", "bot"): 0.75, ("r2", "other"): 0.25,
        ("r3", "bot"): 1.0, ("r3", "other"): 0.5,
    }  # fmt: skip
    table = cases.to_table()
    assert table.num_rows == 24 and table.select(list(CASE_RUN_KEY)).drop_null().num_rows == 24
    runs = table.select(["run_id", RUN_STARTED_AT, RUN_VERDICT]).group_by(["run_id", RUN_STARTED_AT, RUN_VERDICT]).aggregate([]).sort_by("run_id")
    assert runs.to_pylist() == [
        {"run_id": "r1", RUN_STARTED_AT: pa.scalar(1_700_000_000_000, pa.timestamp("ms", tz="UTC")).as_py(), RUN_VERDICT: "passed"},
        {"run_id": "r2", RUN_STARTED_AT: pa.scalar(1_700_000_060_000, pa.timestamp("ms", tz="UTC")).as_py(), RUN_VERDICT: "failed"},
        {"run_id": "r3", RUN_STARTED_AT: pa.scalar(1_700_000_120_000, pa.timestamp("ms", tz="UTC")).as_py(), RUN_VERDICT: "passed"},
    ]
    assert set(table["suite"].to_pylist()) == {"suites/a.jsonl"} and set(table["run_index"].to_pylist()) == {0}
    # the same runs named one by one, a folder twice: each run once
    assert read_runs([tmp_path / "r1", tmp_path / "r2", tmp_path / "r3", tmp_path / "r1"]).count_rows() == 24


def test_the_turns_and_assertions_tables_and_spans_where_a_run_has_them(tmp_path: Path):
    write_run(tmp_path / "plain", "plain", {"bot": [True, False]})
    write_run(tmp_path / "traced", "traced", {"bot": [True]}, spans=True)
    assert read_runs(tmp_path, table="turns").to_table(columns=["run_id"])["run_id"].to_pylist() == ["plain", "plain", "traced"]
    assert read_runs(tmp_path, table="assertions").count_rows() == 0  # these cases asserted nothing
    spans = read_runs(tmp_path, table="spans").to_table(columns=["run_id", "agent", "suite", "case_id", RUN_VERDICT])
    assert spans.to_pylist() == [{"run_id": "traced", "agent": "bot", "suite": "suites/a.jsonl", "case_id": "c0", RUN_VERDICT: "passed"}]
    with pytest.raises(UsageError, match="the tables are cases, turns, assertions, spans"):
        read_runs(tmp_path, table="runs")
    with pytest.raises(UsageError, match="does not exist"):
        read_runs(tmp_path / "nowhere")


def test_a_run_of_the_previous_schema_reads_with_the_current_ones(tmp_path: Path):
    shutil.copytree(SCHEMA6, tmp_path, dirs_exist_ok=True)
    write_run(tmp_path / "new", "new", {"bot": [True, True], "other": [True, False]}, started=1.8e9)
    old = pq.read_schema(SCHEMA6 / "20240102-030405-v6" / "cases.parquet")
    assert "suite" not in old.names and "trace_id" not in old.names
    cases = read_runs(tmp_path)
    assert pass_rates(cases) == {("20240102-030405-v6", "bot"): 2 / 3, ("20240102-030405-v6", "other"): 1 / 3, ("new", "bot"): 1.0, ("new", "other"): 0.5}
    older = cases.to_table(filter=pc.field("run_id") == "20240102-030405-v6")
    assert set(older["suite"].to_pylist()) == {"suites/s.jsonl"}  # worked out from each case's source
    assert older["trace_id"].null_count == older.num_rows  # a column the older run lacks: null
    assert set(older[RUN_VERDICT].to_pylist()) == {"failed"} and set(older["schema_version"].to_pylist()) == {6}
    turns = read_runs(tmp_path, table="turns").to_table(columns=["run_id", "suite"], filter=pc.field("run_id") == "20240102-030405-v6")
    assert turns.num_rows == 6 and set(turns["suite"].to_pylist()) == {"suites/s.jsonl"}
    assert read_run(SCHEMA6 / "20240102-030405-v6").cases(["suite"])["suite"].to_pylist() == ["suites/s.jsonl"] * 6


def test_a_filter_on_a_runs_verdict_or_start_skips_the_other_runs_files_unopened(tmp_path: Path):
    write_run(tmp_path / "good", "good", {"bot": [True]}, started=1.7e9)
    write_run(tmp_path / "bad", "bad", {"bot": [False]}, started=1.7e9 + 1, verdict="failed")
    write_run(tmp_path / "going", "going", {"bot": [True, False]}, started=1.7e9 + 2, verdict=None, finish=False)
    cases = read_runs(tmp_path)
    (tmp_path / "bad" / "cases.parquet").write_bytes(b"no longer Parquet")  # a scan that opened it would fail
    passed = cases.to_table(columns=["run_id", "status"], filter=pc.field(RUN_VERDICT) == "passed")
    assert passed.to_pylist() == [{"run_id": "good", "status": "passed"}]
    assert cases.count_rows(filter=pc.field(RUN_VERDICT).is_null()) == 2  # a run still going: its parts
    early = pc.field(RUN_STARTED_AT) < pa.scalar(1_700_000_000_500, pa.timestamp("ms", tz="UTC"))
    assert cases.to_table(columns=["run_id"], filter=early)["run_id"].to_pylist() == ["good"]


def test_a_damaged_file_is_left_out_and_said(tmp_path: Path):
    write_run(tmp_path / "good", "good", {"bot": [True]})
    write_run(tmp_path / "broken", "broken", {"bot": [True]})
    (tmp_path / "broken" / "cases.parquet").write_bytes(b"PAR1 cut short")
    (tmp_path / "broken" / "run.json").write_text('{"run_id": "broken", "started_at": NaN}')  # Python writes NaN
    problems: list[str] = []
    cases = read_runs(tmp_path, problems=problems)
    assert cases.to_table(columns=["run_id"])["run_id"].to_pylist() == ["good"]
    assert len(problems) == 1 and "broken" in problems[0] and "left out" in problems[0]


def test_a_folder_of_two_hundred_runs_is_read_within_the_time(tmp_path: Path):
    template = write_run(tmp_path / "template", "template", {"bot": [True] * 60 + [False] * 40, "other": [True] * 30 + [False] * 70})
    for number in range(200):  # the same files under 200 run ids: the writer's work is not what is timed
        run = tmp_path / "results" / f"run-{number:03d}"
        run.mkdir(parents=True)
        cases = pq.read_table(template / "cases.parquet")
        pq.write_table(cases.set_column(0, "run_id", pa.array([run.name] * cases.num_rows)), run / "cases.parquet")
        (run / "run.json").write_text(json.dumps({"run_id": run.name, "started_at": 1.7e9 + number, "gate": {"verdict": "passed"}}))
    start = time.perf_counter()
    rates = pass_rates(read_runs(tmp_path / "results"))
    took = time.perf_counter() - start
    assert len(rates) == 400 and rates[("run-123", "bot")] == 0.6 and rates[("run-123", "other")] == 0.3
    assert took < 10.0, f"200 runs took {took:.2f} s"  # a bound for a loaded machine (the figure: benchmarks/trend.py)


def test_read_runs_is_the_packages_own():
    assert "read_runs" in farm.results.__all__ and farm.results.read_runs is read_runs


# --- docs/results.md's examples, run as written -----------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def docs_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of each code block of docs/results.md's "Reading many runs"."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Reading many runs\n", 1)[1].split("\n## ", 1)[0]
    pieces = section.split("```")
    return [(piece.split("\n", 1)[0].strip(), piece.split("\n", 1)[1]) for piece in pieces[1::2]]


def test_the_docs_queries_run_as_written_and_group_by_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    import duckdb

    results = tmp_path / "farm-results"
    # c0 always passes on bot and always fails on other: the agents differ, the case is not flaky;
    # c1 passes once and fails once on bot: flaky on bot
    write_run(results / "r1", "r1", {"bot": [True, True], "other": [False, False]}, started=1.7e9)
    write_run(results / "r2", "r2", {"bot": [True, False], "other": [False, False]}, started=1.7e9 + 60)
    shutil.copytree(SCHEMA6, results, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    blocks = docs_blocks()
    assert [language for language, _ in blocks] == ["python", "python", "python", "sql"]
    namespace: dict = {}
    for language, code in blocks:
        if language == "python" and ("to_pandas" not in code or importlib.util.find_spec("pandas") is not None):
            exec(compile(code, str(DOCS), "exec"), namespace)  # noqa: S102  (the docs' own example)
    printed = capsys.readouterr().out
    assert "'run_id': 'r2', 'agent': 'bot', 'passed_mean': 0.5" in printed and "'run_id': 'r1', 'agent': 'other', 'passed_mean': 0.0" in printed
    assert "│ r2" in printed  # DuckDB's table
    if importlib.util.find_spec("pandas") is not None:  # pandas is no dependency of the farm's tests
        assert "Name: passed" in printed and "0.50" in printed.split("Name: passed")[0]
    rates, flaky, tools = [duckdb.sql(statement).fetchall() for statement in blocks[-1][1].split(";") if statement.strip()]
    assert ("r2", "bot", 0.5) in rates and ("20240102-030405-v6", "other", 1 / 3) in rates
    assert flaky == [("bot", "suites/a.jsonl", "c1", 1, 1)]
    assert tools == []
