"""Results writers: JSONL, Parquet parts and consolidation, run.json."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import farm.writers as writers
from farm.errors import UsageError
from farm.results import (
    OUTPUT_LIMIT,
    AssertionResult,
    CaseResult,
    CheckpointResult,
    Status,
    ToolCallRecord,
    TurnResult,
)
from farm.results._folder import finished_keys
from farm.writers import (
    ASSERTIONS_SCHEMA,
    CASES_SCHEMA,
    TURNS_SCHEMA,
    JSONLWriter,
    MultiWriter,
    ParquetWriter,
    ResultWriter,
    consolidate,
    read_jsonl_results,
    read_run_json,
    rows_from_result,
    schema_doc,
    write_run_json,
)
from farm.writers import parquet as parquet_module
from farm.writers.arrowschema import arrow_schema, arrow_type
from farm.writers.rows import (
    AssertionRow,
    CaseRow,
    Int16,
    Int32,
    JsonText,
    KeyRow,
    Timestamp,
    ToolCallRow,
    TurnRow,
)
from farm.writers.runinfo import RUN_INFO_VERSION, RunInfo, RunOptions
from tests.factories import case_result, lookup_call, usage

ROOT = Path(__file__).resolve().parents[2]
STATUSES = list(Status)
TABLES = {"cases": CASES_SCHEMA, "turns": TURNS_SCHEMA, "assertions": ASSERTIONS_SCHEMA}


# --- building results by hand -------------------------------------------------


def _assertion(passed: bool, **extra) -> AssertionResult:
    fields = dict(type="contains", expected="refund", actual="no refund here", passed=passed)
    if not passed:
        fields["message"] = "expected 'refund'"
    return AssertionResult(**(fields | extra))


def static_result(i: int, run_id: str = "run-x", status: Status | None = None, turns: int = 2) -> CaseResult:
    """A static case with tool calls, structured input, turn and final assertions."""
    status = status or STATUSES[i % len(STATUSES)]
    turn_results = [
        TurnResult(
            turn=n,
            input={"text": "order 42", "lang": "en"} if n == 1 else f"turn {n} of case {i}",
            output=f"reply {n} ✓",
            tool_calls=[
                lookup_call(f"call-{n}"),
                ToolCallRecord(name="log", args="not json {", result=None),
            ]
            if n == 1
            else [],
            awaiting_input=n < turns,
            awaiting_reason="content_is_question" if n < turns else "completed",
            assertions=[_assertion(True), _assertion(status is Status.PASSED, negate=True, score=0.5, reason="r")],
            duration_ms=12.5,
            usage=usage(),
            steps=2 if n == 1 else 1,
        )
        for n in range(1, turns + 1)
    ]
    return case_result(
        f"case-{i:04d}",
        status,
        turn_results,
        run_id=run_id,
        run_index=i % 3,
        attempt=1 + (i % 7 == 0),
        name=f"Case {i}",
        agent="support-bot",
        tags=["smoke", f"group-{i % 4}"],
        source=f"cases/static.jsonl:{i + 1}",
        final_assertions=[_assertion(True, type="turn_count", expected={"max": 5}, actual=turns)],
        duration_ms=25.0 + i,
        error=None if status is Status.PASSED else f"{status.value}: something happened",
        started_at=1_700_000_000.25 + i,
        worker=f"worker-{i % 4}",
    )


def dynamic_result(i: int, run_id: str = "run-x") -> CaseResult:
    """A dynamic case: one checkpoint reached at turn 2, one never reached, one never checked."""
    return case_result(
        f"dyn-{i:04d}",
        Status.FAILED,
        [TurnResult(turn=n, input=f"sim {n}", input_source="simulated", output="ok") for n in (1, 2, 3)],
        run_id=run_id,
        run_index=0,
        mode="dynamic",
        checkpoints=[
            CheckpointResult(id="greeted", description="says hello", reached=True, reached_at_turn=2,
                             assertion=_assertion(True, type="llm_judge", score=0.9)),
            CheckpointResult(id="refunded", required=True, reached=False, assertion=_assertion(False)),
            CheckpointResult(id="upsell", required=False),
        ],
        error="required checkpoint 'refunded' not reached",
    )


def skipped_result(i: int, run_id: str = "run-x") -> CaseResult:
    """A case that never loaded: no turns, no mode, no start time."""
    return CaseResult(run_id=run_id, id=f"bad-{i:04d}", status=Status.ERROR, error="the case file line is not JSON")


def mixed_results(count: int, run_id: str = "run-x", prefix: str = "") -> list[CaseResult]:
    """``count`` results of every shape and status, with unique (id, run_index)."""
    made = []
    for i in range(count):
        kind = i % 5
        if kind == 3:
            result = dynamic_result(i, run_id)
        elif kind == 4:
            result = skipped_result(i, run_id)
        else:
            result = static_result(i, run_id, status=STATUSES[(i // 5 + i) % len(STATUSES)])
        made.append(result.model_copy(update={"id": prefix + result.id}))
    return made


def expected_counts(results: list[CaseResult]) -> dict[str, int]:
    return {
        "cases": len(results),
        "turns": sum(len(r.turns) for r in results),
        "assertions": sum(
            sum(len(t.assertions) for t in r.turns) + len(r.final_assertions) + len(r.checkpoints) for r in results
        ),
    }


def table_rows(run_dir: Path) -> dict[str, int]:
    return {name: pq.read_metadata(run_dir / f"{name}.parquet").num_rows for name in TABLES}


def part_names(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / ".parts").iterdir())


# --- the package ------------------------------------------------------------------


def test_exports_are_what_is_meant():
    assert sorted(writers.__all__) == sorted(
        [
            "ASSERTIONS_SCHEMA", "CASES_SCHEMA", "RUN_JSON", "SPANS_SCHEMA", "TURNS_SCHEMA", "JSONLWriter", "MultiWriter",
            "ParquetWriter", "ResultWriter", "RunInfo", "consolidate", "read_jsonl_results",
            "read_run_json", "rows_from_result", "write_run_json",
        ]
    )
    for name in writers.__all__:
        assert getattr(writers, name) is not None


def test_every_writer_implements_the_protocol(tmp_path):
    jsonl = JSONLWriter(tmp_path / "r.jsonl")
    parquet = ParquetWriter(tmp_path / "run")
    multi = MultiWriter([jsonl, parquet])
    for writer in (jsonl, parquet, multi):
        assert isinstance(writer, ResultWriter)
    multi.close()
    assert jsonl.closed and parquet.closed


# --- the row models -----------------------------------------------------------------


def test_every_column_is_nullable_and_documented():
    for schema in (CASES_SCHEMA, TURNS_SCHEMA, ASSERTIONS_SCHEMA):
        assert all(field.nullable for field in schema)  # older tables and partial rows still cast
    for row in (CaseRow, TurnRow, AssertionRow, ToolCallRow):  # every column is documented where it is defined
        assert [name for name in row.model_fields if name not in schema_doc.column_docs(row)] == [], row


def test_a_column_without_a_docstring_of_its_own_takes_its_records():
    assert schema_doc.column_docs(CaseRow)["hint"] == "What the user can do about it."
    assert schema_doc.column_docs(ToolCallRow)["mocked"] == "Whether ``result`` came from a ``tool_mocks`` entry."
    assert schema_doc.column_docs(CaseRow)["mode"] == "``single``, ``static`` or ``dynamic``; null when the case did not load."  # its own


def test_arrow_types_follow_the_annotations():
    assert arrow_type(str) == pa.string() and arrow_type(str | None) == pa.string()
    assert (arrow_type(int), arrow_type(Int32), arrow_type(Int16 | None)) == (pa.int64(), pa.int32(), pa.int16())
    assert (arrow_type(float), arrow_type(bool)) == (pa.float64(), pa.bool_())
    assert arrow_type(Timestamp | None) == pa.timestamp("ms", tz="UTC")
    assert arrow_type(JsonText | None) == pa.string()
    assert arrow_type(list[str]) == pa.list_(pa.field("element", pa.string()))
    assert arrow_type(ToolCallRow) == pa.struct(
        [("id", pa.string()), ("name", pa.string()), ("args", pa.string()), ("result", pa.string()), ("mocked", pa.bool_())]
    )
    with pytest.raises(TypeError, match="No Arrow type for a row field annotated"):
        arrow_type(dict[str, int])


def test_a_row_model_field_named_like_a_result_field_is_copied_from_it():
    class WithWorker(KeyRow):
        built_from = CaseResult
        worker: str | None
        """The worker."""
        turns_seen: Int32
        """Given by the builder."""

    result = static_result(1)
    row = WithWorker._row(result, {**KeyRow.of(result), "turns_seen": 2})
    assert row == {"run_id": "run-x", "run_index": 1, "attempt": 1, "suite": "cases/static.jsonl", "case_id": "case-0001", "agent": "support-bot",
                   "worker": "worker-1", "turns_seen": 2}
    assert arrow_schema(WithWorker).names == ["run_id", "run_index", "attempt", "suite", "case_id", "agent", "worker", "turns_seen"]
    with pytest.raises(TypeError, match=r"WithWorker was built without the columns \['turns_seen'\]"):
        WithWorker._row(result, KeyRow.of(result))


def test_docs_results_md_is_current():
    path = ROOT / schema_doc.DOC
    text = path.read_text(encoding="utf-8")
    assert text.count("<!-- columns: ") == len(schema_doc.TABLES)
    assert schema_doc.update(text) == text, (
        f"{schema_doc.DOC} does not match farm/writers/rows.py; regenerate it from the repository root with: "
        f"{schema_doc.COMMAND}"
    )
    assert "read_parquet('farm-results/*/cases.parquet', union_by_name = true)" in text and "read_runs(\"farm-results\")" in text


def test_schema_doc_check_reports_a_stale_page(tmp_path, capsys):
    page = tmp_path / "results.md"
    page.write_text("# Results\n\n<!-- columns: turns -->\n| stale |\n<!-- end columns -->\n", encoding="utf-8")
    assert schema_doc.main([str(page), "--check"]) == 1
    assert f"run: {schema_doc.COMMAND}" in capsys.readouterr().err
    assert schema_doc.main([str(page)]) == 0
    written = page.read_text(encoding="utf-8")
    assert "| `tool_calls` | list<struct<…>> | The turn's tool calls in order, each a struct of `id` string" in written
    assert schema_doc.main([str(page), "--check"]) == 0
    assert schema_doc.main([str(tmp_path / "missing.md")]) == 2
    assert "missing.md does not exist; run this from the repository root" in capsys.readouterr().err


# --- rows_from_result ---------------------------------------------------------------


def test_rows_from_result_flattens_a_static_case():
    result = static_result(0, status=Status.FAILED)
    case, turns, assertions, _ = rows_from_result(result)

    assert case["case_id"] == "case-0000" and case["status"] == "failed"
    assert case["tags"] == ["smoke", "group-0"]
    assert case["started_at"] == datetime(2023, 11, 14, 22, 13, 20, 250000, tzinfo=UTC)
    assert (case["prompt_tokens"], case["total_tokens"]) == (20, 30)
    # 2 turns x 2 assertions (one fails per turn) + 1 final that passes
    assert (case["assertions_passed"], case["assertions_failed"]) == (3, 2)
    assert (case["checkpoints_reached"], case["checkpoints_total"]) == (0, 0)

    assert [t["turn"] for t in turns] == [1, 2]
    assert json.loads(turns[0]["input"]) == {"text": "order 42", "lang": "en"}
    assert turns[1]["input"] == "turn 2 of case 0"  # plain text stays plain
    first, second = turns[0]["tool_calls"]
    assert first == {"id": "call-1", "name": "lookup_order", "args": '{"order": 42}',
                     "result": '{"status": "shipped"}', "mocked": True}
    assert json.loads(second["args"]) == "not json {" and second["result"] is None
    assert turns[1]["tool_calls"] == []

    assert [(a["scope"], a["turn"], a["position"]) for a in assertions] == [
        ("turn", 1, 0), ("turn", 1, 1), ("turn", 2, 0), ("turn", 2, 1), ("final", None, 0)
    ]
    final = assertions[-1]
    assert json.loads(final["expected"]) == {"max": 5} and json.loads(final["actual"]) == 2
    assert json.loads(assertions[0]["expected"]) == "refund"
    assert assertions[1]["negate"] is True and assertions[1]["score"] == 0.5
    assert all(a["checkpoint_id"] is None and a["required"] is None for a in assertions)

    key = ("run-x", 0, 2, "case-0000")  # case 0 is a second attempt
    for row in [case, *turns, *assertions]:
        assert (row["run_id"], row["run_index"], row["attempt"], row["case_id"]) == key


def test_rows_from_result_gives_one_row_per_checkpoint():
    _, _, assertions, _ = rows_from_result(dynamic_result(1))

    assert [a["scope"] for a in assertions] == ["checkpoint"] * 3
    greeted, refunded, upsell = assertions
    assert (greeted["checkpoint_id"], greeted["passed"], greeted["turn"]) == ("greeted", True, 2)
    assert greeted["type"] == "llm_judge" and greeted["score"] == 0.9 and greeted["description"] == "says hello"
    # passed means reached, whatever the last attempt's assertion said
    assert (refunded["passed"], refunded["turn"], refunded["message"]) == (False, None, "expected 'refund'")
    assert (upsell["type"], upsell["passed"], upsell["required"], upsell["error"]) == (None, False, False, False)
    assert [a["position"] for a in assertions] == [0, 1, 2]


def test_rows_from_result_counts_checkpoints_on_the_case_row():
    case, turns, _, _ = rows_from_result(dynamic_result(1))
    assert (case["checkpoints_reached"], case["checkpoints_total"]) == (1, 3)
    assert (case["assertions_passed"], case["assertions_failed"]) == (0, 0)
    assert [t["input_source"] for t in turns] == ["simulated"] * 3


def test_rows_have_exactly_the_schema_columns():
    for result in mixed_results(5):
        case, turns, assertions, _ = rows_from_result(result)
        for rows, schema, model in (
            ([case], CASES_SCHEMA, CaseRow), (turns, TURNS_SCHEMA, TurnRow), (assertions, ASSERTIONS_SCHEMA, AssertionRow)
        ):
            for row in rows:
                assert sorted(row) == sorted(schema.names)
                model.model_validate(row)  # every column, each of its type
            pa.Table.from_pylist(rows, schema=schema)  # the values fit the types


def test_a_case_that_never_loaded_has_nulls_not_zeros():
    case, turns, assertions, _ = rows_from_result(skipped_result(0))
    assert case["mode"] is None and case["started_at"] is None and case["status"] == "error"
    assert turns == [] and assertions == []


# --- writing 200 through both ---------------------------------------------------------


def test_200_results_through_jsonl_and_parquet(tmp_path):
    run_dir = tmp_path / "farm-results" / "run-x"
    results = mixed_results(200)
    with MultiWriter([JSONLWriter(run_dir / "results.jsonl"), ParquetWriter(run_dir, rows_per_part=64)]) as multi:
        for result in results:
            multi.write(result)

    lines = read_jsonl_results(run_dir / "results.jsonl")
    assert len(lines) == 200
    assert CaseResult.model_validate(lines[7]) == results[7]
    assert {line["status"] for line in lines} == {s.value for s in Status}

    assert not (run_dir / ".parts").exists()
    assert table_rows(run_dir) == expected_counts(results)
    for name, schema in TABLES.items():
        table = pq.read_table(run_dir / f"{name}.parquet")
        assert table.schema.equals(schema, check_metadata=False), name
        assert table["run_id"].null_count == 0
        assert pc.all(pc.equal(table["run_id"], "run-x")).as_py() is True
    cases = pq.read_table(run_dir / "cases.parquet")
    assert cases["case_id"].to_pylist() == [r.id for r in results]  # written order kept
    assert cases.schema.field("started_at").type == pa.timestamp("ms", tz="UTC")
    assert cases.schema.field("schema_version").type == pa.int16()
    turns = pq.read_table(run_dir / "turns.parquet")
    calls = pc.list_flatten(turns["tool_calls"])
    assert calls.type == TURNS_SCHEMA.field("tool_calls").type.value_type
    assert sorted(set(pc.struct_field(calls, "name").to_pylist())) == ["log", "lookup_order"]
    scopes = pq.read_table(run_dir / "assertions.parquet")["scope"].value_counts().to_pylist()
    assert {s["values"] for s in scopes} == {"turn", "final", "checkpoint"}


def test_an_empty_run_still_has_three_empty_tables(tmp_path):
    ParquetWriter(tmp_path / "run").close()
    for name, schema in TABLES.items():
        table = pq.read_table(tmp_path / "run" / f"{name}.parquet")
        assert table.num_rows == 0 and table.schema.equals(schema, check_metadata=False)


def test_a_run_that_wrote_no_part_gets_the_tables_a_consolidation_would_give(tmp_path):
    results = mixed_results(30)
    direct, via_part = tmp_path / "direct", tmp_path / "via-part"
    with ParquetWriter(direct) as writer:
        for result in results:
            writer.write(result)
        assert part_names(direct) == []
    with ParquetWriter(via_part) as writer:
        for result in results:
            writer.write(result)
        writer.flush()
        assert part_names(via_part) == ["assertions-000001.parquet", "cases-000001.parquet", "turns-000001.parquet"]
    for table in ("cases", "turns", "assertions"):
        written, consolidated = pq.read_table(direct / f"{table}.parquet"), pq.read_table(via_part / f"{table}.parquet")
        assert written.schema.equals(consolidated.schema, check_metadata=True)
        assert written.equals(consolidated)
    assert not (direct / ".parts").exists()
    assert table_rows(direct) == expected_counts(results)


def test_closed_writers_refuse_writes_and_close_twice(tmp_path):
    jsonl, parquet = JSONLWriter(tmp_path / "r.jsonl"), ParquetWriter(tmp_path / "run")
    for writer in (jsonl, parquet):
        writer.close()
        writer.close()
        with pytest.raises(ValueError, match="has been closed"):
            writer.write(static_result(0))


# --- JSONL --------------------------------------------------------------------------------


def test_jsonl_line_is_on_disk_before_close(tmp_path):
    path = tmp_path / "deep" / "er" / "results.jsonl"
    writer = JSONLWriter(path)
    writer.write(static_result(0))
    assert len(path.read_bytes().splitlines()) == 1
    writer.close()


def test_jsonl_fsyncs_every_n_lines_and_on_close(tmp_path, monkeypatch):
    synced = []
    monkeypatch.setattr("farm.writers.jsonl.os.fsync", lambda fd: synced.append(fd))
    writer = JSONLWriter(tmp_path / "r.jsonl", fsync_lines=3, fsync_seconds=3600)
    for i in range(7):
        writer.write(static_result(i))
    assert len(synced) == 2
    writer.close()
    assert len(synced) == 3


def test_jsonl_fsyncs_after_some_seconds(tmp_path, monkeypatch):
    synced, now = [], [0.0]
    monkeypatch.setattr("farm.writers.jsonl.os.fsync", lambda fd: synced.append(fd))
    writer = JSONLWriter(tmp_path / "r.jsonl", fsync_lines=1000, fsync_seconds=2.0, clock=lambda: now[0])
    writer.write(static_result(0))
    now[0] = 2.5
    assert synced == []
    writer.write(static_result(1))
    assert len(synced) == 1
    writer.close()


@pytest.mark.parametrize("torn", [b'{"id": "case-9999", "run_in', '{"id": "caf\u00e9'.encode()[:-1]])
def test_torn_last_line_is_ignored(tmp_path, torn):
    path = tmp_path / "results.jsonl"
    with JSONLWriter(path) as writer:
        for result in mixed_results(5):
            writer.write(result)
    with open(path, "ab") as file:
        file.write(torn)

    assert finished_keys(path) == {r.run_key() for r in mixed_results(5)}
    assert len(read_jsonl_results(path)) == 5


def test_an_undecodable_line_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "a", "run_index": 0}\n{"id": "b", "run\n{"id": "c", "run_index": 0}\n')
    with pytest.raises(UsageError, match=r"results.jsonl:2"):
        finished_keys(path)


def test_append_cuts_a_torn_tail_and_keeps_a_whole_one(tmp_path):
    torn, whole = tmp_path / "torn.jsonl", tmp_path / "whole.jsonl"
    torn.write_text('{"id": "a", "run_index": 0}\n{"id": "b", "ru')
    whole.write_text('{"id": "a", "run_index": 0}\n{"id": "b", "run_index": 1}')
    for path in (torn, whole):
        with JSONLWriter(path, append=True) as writer:
            writer.write(static_result(1))
    ours = static_result(1).run_key()
    assert finished_keys(torn, "bot") == {("", "a", 0, "bot"), ours}  # each result's own agent first
    assert finished_keys(whole, "bot") == {("", "a", 0, "bot"), ("", "b", 1, "bot"), ours}
    assert ours[:2] == ("cases/static.jsonl", "case-0001")


def test_jsonl_without_append_starts_afresh(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": "old", "run_index": 0}\n')
    with JSONLWriter(path) as writer:
        writer.write(static_result(2))
    assert finished_keys(path) == {("cases/static.jsonl", "case-0002", 2, "support-bot")}


# --- Parquet parts ------------------------------------------------------------------------


def test_a_part_is_written_every_n_rows(tmp_path):
    run_dir = tmp_path / "run"
    writer = ParquetWriter(run_dir, rows_per_part=10, seconds_per_part=3600)
    for i in range(23):
        writer.write(static_result(i, turns=1).model_copy(update={"final_assertions": []}))
    # each result is 1 case row, 1 turn row, 2 assertion rows: the assertions buffer fills
    # first, every 5 results, and takes the other tables' rows along into the same part
    tables = ("assertions", "cases", "turns")
    assert part_names(run_dir) == [f"{t}-{n:06d}.parquet" for t in tables for n in (1, 2, 3, 4)]
    in_parts = sum(pq.read_metadata(run_dir / ".parts" / f"cases-{n:06d}.parquet").num_rows for n in (1, 2, 3, 4))
    assert in_parts == 20
    writer.close()
    assert table_rows(run_dir)["cases"] == 23


def test_a_part_is_written_after_some_seconds(tmp_path):
    now = [100.0]
    run_dir = tmp_path / "run"
    writer = ParquetWriter(run_dir, rows_per_part=5000, seconds_per_part=10.0, clock=lambda: now[0])
    writer.write(static_result(0))
    now[0] = 105.0
    writer.write(static_result(1))
    assert part_names(run_dir) == []
    now[0] = 110.5
    writer.write(static_result(2))
    assert pq.read_metadata(run_dir / ".parts" / "cases-000001.parquet").num_rows == 3
    writer.close()


def test_parts_of_a_crashed_writer_are_consolidated(tmp_path):
    run_dir = tmp_path / "run"
    results = mixed_results(60)
    writer = ParquetWriter(run_dir, rows_per_part=10_000)
    for result in results[:25]:
        writer.write(result)
    writer.flush()
    for result in results[25:50]:
        writer.write(result)
    writer.flush()
    assert len(part_names(run_dir)) == 6
    for result in results[50:]:
        writer.write(result)  # buffered only: the crash loses these, and only these
    del writer
    (run_dir / ".parts" / ".cases-000099.parquet.tmp").write_bytes(b"half a part")

    assert consolidate(run_dir) == expected_counts(results[:50])
    assert table_rows(run_dir) == expected_counts(results[:50])
    assert pq.read_table(run_dir / "cases.parquet")["case_id"].to_pylist() == [r.id for r in results[:50]]
    assert not (run_dir / ".parts").exists()


def test_consolidating_again_after_an_interruption_counts_no_part_twice(tmp_path):
    run_dir = tmp_path / "run"
    results = mixed_results(30)
    writer = ParquetWriter(run_dir, rows_per_part=10)
    for result in results:
        writer.write(result)
    writer.flush()
    kept = tmp_path / "parts-copy"
    shutil.copytree(run_dir / ".parts", kept)
    consolidate(run_dir)
    # as if the process died after replacing the tables but before deleting the parts
    shutil.copytree(kept, run_dir / ".parts")

    assert consolidate(run_dir) == expected_counts(results)
    assert table_rows(run_dir) == expected_counts(results)


def test_a_resumed_run_keeps_old_rows_and_leftover_parts(tmp_path):
    run_dir = tmp_path / "run"
    first = mixed_results(30, prefix="a-")
    crashed = mixed_results(12, prefix="b-")
    resumed = mixed_results(8, prefix="c-")
    with ParquetWriter(run_dir) as writer:
        for result in first:
            writer.write(result)
    writer = ParquetWriter(run_dir)
    for result in crashed:
        writer.write(result)
    writer.flush()
    del writer  # crashed: its part stays, the tables hold only the first run
    assert table_rows(run_dir)["cases"] == 30

    with ParquetWriter(run_dir, rows_per_part=5) as writer:
        for result in resumed:
            writer.write(result)

    everything = first + crashed + resumed
    assert table_rows(run_dir) == expected_counts(everything)
    assert pq.read_table(run_dir / "cases.parquet")["case_id"].to_pylist() == [r.id for r in everything]


def test_consolidation_streams_into_bounded_row_groups(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet_module, "ROW_GROUP_ROWS", 40)
    run_dir = tmp_path / "run"
    with ParquetWriter(run_dir, rows_per_part=15) as writer:
        for result in mixed_results(100):
            writer.write(result)
    groups = pq.ParquetFile(run_dir / "cases.parquet").metadata
    sizes = [groups.row_group(i).num_rows for i in range(groups.num_row_groups)]
    assert sum(sizes) == 100 and max(sizes) < 40 + 15 and len(sizes) > 1


# --- many runs as one dataset ------------------------------------------------------------------


def test_many_runs_read_as_one_dataset(tmp_path):
    root = tmp_path / "farm-results"
    for run_id, count in (("run-a", 20), ("run-b", 30)):
        with ParquetWriter(root / run_id) as writer:
            for result in mixed_results(count, run_id=run_id):
                writer.write(result)

    paths = sorted(str(p) for p in root.glob("*/cases.parquet"))
    dataset = ds.dataset(paths, format="parquet")
    assert dataset.count_rows() == 50
    assert dataset.schema.equals(CASES_SCHEMA, check_metadata=False)
    by_run = dataset.to_table(columns=["run_id"])["run_id"].value_counts().to_pylist()
    assert {row["values"]: row["counts"] for row in by_run} == {"run-a": 20, "run-b": 30}

    assert duckdb.sql(f"select count(*) from read_parquet('{root}/*/cases.parquet')").fetchall() == [(50,)]
    turns = duckdb.sql(
        f"select run_id, count(*) from read_parquet('{root}/*/turns.parquet') group by run_id order by run_id"
    ).fetchall()
    assert turns == [
        ("run-a", expected_counts(mixed_results(20))["turns"]),
        ("run-b", expected_counts(mixed_results(30))["turns"]),
    ]
    ((calls,),) = duckdb.sql(
        f"select count(*) from (select unnest(tool_calls) as c from read_parquet('{root}/*/turns.parquet'))"
        " where c.mocked and c.args::JSON ->> '$.order' = '42'"
    ).fetchall()
    assert calls > 0


# --- MultiWriter -------------------------------------------------------------------------------


class _Recorder:
    def __init__(self, fail: bool = False):
        self.fail, self.calls = fail, []

    def write(self, result):
        self.calls.append(("write", result.id))
        if self.fail:
            raise OSError("disk full")

    def flush(self):
        self.calls.append(("flush",))

    def close(self):
        self.calls.append(("close",))
        if self.fail:
            raise OSError("disk still full")


def test_multiwriter_fans_out_even_past_a_failing_writer():
    broken, healthy = _Recorder(fail=True), _Recorder()
    multi = MultiWriter([broken, healthy])
    with pytest.raises(OSError, match="disk full"):
        multi.write(static_result(3))
    multi.flush()
    with pytest.raises(OSError, match="disk still full"):
        multi.close()
    assert healthy.calls == [("write", "case-0003"), ("flush",), ("close",)]
    assert broken.calls == healthy.calls


def test_multiwriter_reports_every_failure():
    multi = MultiWriter([_Recorder(fail=True), _Recorder(fail=True)])
    with pytest.raises(OSError) as caught:
        multi.write(static_result(0))
    assert any("another writer also failed" in note for note in caught.value.__notes__)


# --- run.json --------------------------------------------------------------------------------------


def test_run_json_round_trips_atomically(tmp_path):
    run_dir = tmp_path / "runs" / "run-x"
    info = RunInfo(
        run_id="run-x",
        command=["farm", "test", "-i", "cases/"],
        engine="local",
        config={"agents": {"target": {"connector": "local"}}},
        versions={"farm": "0.1.0"},
        started_at=1_750_000_000.5,
        options={"timeout": 300.0, "on_missing_input": "fail"},
    )
    path = write_run_json(run_dir, info)
    assert path == run_dir / "run.json"
    back = read_run_json(run_dir)
    assert isinstance(back, RunInfo) and back == info
    assert json.loads(path.read_text())["schema_version"] == RUN_INFO_VERSION

    back.status, back.ended_at = "finished", 1_750_000_100.0
    write_run_json(run_dir, back)
    assert read_run_json(run_dir).status == "finished"
    assert sorted(p.name for p in run_dir.iterdir()) == ["run.json"]


def test_run_json_from_another_tool_keeps_what_it_does_not_know(tmp_path):
    write_run_json(tmp_path, {"run_id": "old", "started_at": 1.0, "notes": "kept"})
    back = read_run_json(tmp_path)
    assert back.run_id == "old" and back.model_dump()["notes"] == "kept"
    (tmp_path / "run.json").write_text('{"run_id": "x", "status": "exploded"}')
    with pytest.raises(UsageError, match="status"):
        read_run_json(tmp_path)


def test_run_json_options_an_older_farm_wrote_read_as_run_options(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "old", "options": {"timeout": 300.0, "on_missing_input": "fail", "tags": [], "gone": 1}}))
    options = read_run_json(tmp_path).options
    assert isinstance(options, RunOptions)
    assert (options.timeout, options.on_missing_input, options.tags) == (300.0, "fail", [])
    assert (options.retries, options.cache, options.golden) == (None, None, None)  # keys it did not write yet
    assert "gone" not in options.model_dump()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "older"}))
    assert read_run_json(tmp_path).options == RunOptions()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "x", "options": {"timeout": "soon"}}))
    with pytest.raises(UsageError, match="options.timeout"):
        read_run_json(tmp_path)


def test_run_json_missing_or_broken_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        read_run_json(tmp_path)
    (tmp_path / "run.json").write_text("{half")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_run_json(tmp_path)
    (tmp_path / "run.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match="not an object"):
        read_run_json(tmp_path)


# --- long outputs are cut in the rows -------------------------------------------


def test_a_very_long_output_is_cut_in_jsonl_and_parquet_with_its_length_kept(tmp_path):
    long_reply = "é" * (OUTPUT_LIMIT + 34_464)  # 100k characters, twice as many bytes
    result = CaseResult(id="long", status=Status.PASSED, run_id="r1",
                        turns=[TurnResult(turn=1, output=long_reply), TurnResult(turn=2, output="short")])
    with MultiWriter([JSONLWriter(tmp_path / "results.jsonl"), ParquetWriter(tmp_path)]) as writer:
        writer.write(result)

    assert result.turns[0].output == long_reply  # the record in memory stays whole (assertions judged it)
    line = (tmp_path / "results.jsonl").read_text(encoding="utf-8")
    assert len(line) < 2 * OUTPUT_LIMIT
    row = json.loads(line)["turns"]
    assert list(row[0])[list(row[0]).index("output") + 1] == "output_chars"  # right after output
    assert (len(row[0]["output"]), row[0]["output_chars"]) == (OUTPUT_LIMIT, 100_000)
    assert row[0]["output"] == long_reply[:OUTPUT_LIMIT]
    assert (row[1]["output"], row[1]["output_chars"]) == ("short", None)

    [data] = read_jsonl_results(tmp_path / "results.jsonl")
    back = CaseResult.model_validate(data)
    assert back.turns[0].output_chars == 100_000 and len(back.turns[0].output) == OUTPUT_LIMIT
    _, turn_rows, _, _ = rows_from_result(back)  # rebuilt from the JSONL (a resume): the length survives
    assert turn_rows[0]["output_chars"] == 100_000

    turns = pq.read_table(tmp_path / "turns.parquet").sort_by("turn").to_pylist()
    assert [len(t["output"]) for t in turns] == [OUTPUT_LIMIT, 5]
    assert [t["output_chars"] for t in turns] == [100_000, None]


def test_spans_are_a_table_of_their_own_only_in_a_run_that_captured_some(tmp_path):
    from farm.results import SpanRecord

    ids = {"trace_id": "a" * 32, "span_id": "b" * 16, "parent_span_id": "c" * 16}
    span = SpanRecord(**ids, name="execute_tool search", operation="execute_tool", tool_name="search", start=1.5, duration_ms=2.0, attributes={"k": "v"})
    traced = case_result("traced", Status.PASSED, turns=[TurnResult(turn=1, input="hi", output="ok", spans=[span, span.model_copy(update={"span_id": "d" * 16})])])
    for rows_per_part in (1, 5000):  # through parts and their consolidation, and written whole at the close
        run_dir = tmp_path / f"run-{rows_per_part}"
        with ParquetWriter(run_dir, rows_per_part=rows_per_part) as writer:
            writer.write(case_result("plain", Status.PASSED))
            writer.write(traced)
        spans = pq.read_table(run_dir / "spans.parquet")
        assert spans["case_id"].to_pylist() == ["traced", "traced"] and spans["tool_name"].to_pylist() == ["search", "search"]
        assert spans["attributes"].to_pylist() == ['{"k": "v"}'] * 2
    ParquetWriter(tmp_path / "none").close()
    assert not (tmp_path / "none" / "spans.parquet").exists()
