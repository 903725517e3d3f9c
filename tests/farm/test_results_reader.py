"""The reader of run folders (``farm.results``): one typed record per run, every row keyed by
:data:`CASE_RUN_KEY`, and a corrupt run that lists its problems instead of raising. Run folders are
written by the farm's own writers, then damaged by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from farm.errors import UsageError
from farm.results import CASE_RUN_KEY, Status, TurnResult, list_runs, read_run
from farm.writers import JSONLWriter, ParquetWriter, consolidate, write_run_json
from tests.factories import case_result


def results(run_id: str) -> list:
    """Two agents, two tries of one case: every case run has one turn that says whose it is."""
    return [
        case_result(
            "greet", Status.PASSED if agent == "A" else Status.FAILED, run_id=run_id, run_index=index, agent=agent,
            source="suite.jsonl:1", turns=[TurnResult(turn=1, input="hi", output=f"{agent} says hello", duration_ms=10.0 * (index + 1))],
        )
        for agent in ("A", "B")
        for index in range(2)
    ]  # fmt: skip


def write_run(folder: Path, run_id: str = "run-1", *, finish: bool = True, info: dict | None = None) -> Path:
    with JSONLWriter(folder / "results.jsonl") as jsonl:
        parquet = ParquetWriter(folder)
        for result in results(run_id):
            jsonl.write(result)
            parquet.write(result)
        parquet.close() if finish else parquet.flush()
    write_run_json(folder, {"run_id": run_id, "status": "finished" if finish else "running", "started_at": 1.0, "agents": ["A", "B"], **(info or {})})
    return folder


def test_every_table_carries_the_case_run_key_and_each_agents_rows_are_its_own(tmp_path: Path):
    run = read_run(write_run(tmp_path / "run-1"))
    assert CASE_RUN_KEY == ("run_id", "agent", "suite", "case_id", "run_index", "attempt")
    for table in (run.cases(), run.turns(), run.assertions()):
        assert set(CASE_RUN_KEY) <= set(table.column_names)
    turns = run.turns(columns=["agent", "output"], filters=pc.field("agent") == "B")
    assert turns["output"].to_pylist() == ["B says hello", "B says hello"]
    assert run.run_id == "run-1" and run.status == "finished" and run.info.agents == ["A", "B"] and run.problems == []
    b_rows = run.case_rows("turns", "greet", agent="B")
    assert b_rows.num_rows == 2 and set(b_rows["agent"].to_pylist()) == {"B"}


def test_a_run_still_going_reads_its_parts_and_a_results_file_reads_as_a_run(tmp_path: Path):
    going = read_run(write_run(tmp_path / "going", finish=False))
    assert not (going.path / "cases.parquet").exists() and going.cases().num_rows == 4 and going.status == "running"
    jsonl = read_run(tmp_path / "going" / "results.jsonl")
    assert jsonl.cases(columns=["agent", "status"]).to_pylist()[0] == {"agent": "A", "status": "passed"}
    assert jsonl.turns().num_rows == 4 and jsonl.run_id == "run-1"
    with pytest.raises(UsageError, match="does not exist"):
        read_run(tmp_path / "nowhere")


def test_parts_a_cut_short_consolidation_left_behind_are_not_read_twice(tmp_path: Path):
    folder = write_run(tmp_path / "run", finish=False)
    kept = {path.name: path.read_bytes() for path in (folder / ".parts").iterdir()}
    consolidate(folder)  # the tables now hold every part...
    (folder / ".parts").mkdir()
    for name, data in kept.items():  # ...and the parts are still there, as after a crash before their removal
        (folder / ".parts" / name).write_bytes(data)
    run = read_run(folder)
    assert run.cases().num_rows == 4 and run.turns().num_rows == 4 and run.case_rows("turns", "greet").num_rows == 4


def test_each_agents_connector_is_kept(tmp_path: Path):
    run = read_run(write_run(tmp_path / "run", info={"agent": "A", "connector": "a", "connectors": {"A": "a", "B": "b"}}))
    assert (run.connector_of("A"), run.connector_of("B")) == ("a", "b")
    older = read_run(write_run(tmp_path / "older", info={"agent": "A", "connector": "a", "config": {"agents": {"B": {"connector": "b"}}}}))
    assert (older.connector_of("A"), older.connector_of("B")) == ("a", "b")  # a run.json before `connectors`: its config says


def test_a_wrongly_typed_or_nan_field_of_run_json_reads_as_unknown_and_says_so(tmp_path: Path):
    folder = write_run(tmp_path / "run")
    text = json.dumps({"run_id": "run", "status": "finished", "started_at": "yesterday", "runs": float("nan"), "cost": {"cost_usd": float("inf")}})
    (folder / "run.json").write_text(text)  # Python writes NaN and Infinity, which JSON has not
    run = read_run(folder)
    assert run.info.started_at is None and run.info.runs == 1 and run.info.cost == {"cost_usd": None} and run.status == "finished"
    problems = run.problems
    assert len(problems) == 3 and all(problem.startswith(f"{folder / 'run.json'}: ") for problem in problems)
    assert any("started_at is text, not a number" in problem for problem in problems)
    assert any("runs is nan" in problem for problem in problems) and any("cost.cost_usd is inf" in problem for problem in problems)
    assert not any("pydantic" in problem or "Input should" in problem for problem in problems)
    assert run.cases().num_rows == 4  # the tables are whole: only run.json's fields are unknown
    (folder / "run.json").write_text("[1, 2")
    broken = read_run(folder)
    assert broken.info.run_id == "" and broken.run_id == "run" and "cannot be read" in broken.problems[0]


def test_a_truncated_parquet_file_is_a_problem_and_the_other_files_are_read(tmp_path: Path):
    folder = write_run(tmp_path / "run")
    cases = folder / "cases.parquet"
    cases.write_bytes(cases.read_bytes()[:100])
    run = read_run(folder)
    assert run.cases().num_rows == 0 and run.turns().num_rows == 4
    assert run.problems == [f"{cases} cannot be read (" + run.problems[0].split(" cannot be read (", 1)[1]]
    assert run.problems[0].endswith("; its rows are left out.")
    assert run.case_rows("cases", "greet").num_rows == 0 and len(run.problems) == 1  # said once


def test_a_table_of_another_shape_is_a_problem_wherever_it_is_read(tmp_path: Path):
    folder = write_run(tmp_path / "run")
    key = {"run_id": ["run"], "agent": ["A"], "case_id": ["greet"], "run_index": [0], "attempt": [1]}
    pq.write_table(pa.table({**key, "turn": [["not", "a", "number"]]}), folder / "turns.parquet")
    pq.write_table(pa.table({"x": [1]}), folder / "assertions.parquet")
    run = read_run(folder)
    assert run.turns().num_rows == 0 and run.case_rows("turns", "greet").num_rows == 0
    assert list(run.batches("turns", ["case_id", "turn"])) == [] and run.assertions().num_rows == 0
    assert run.cases().num_rows == 4
    assert len(run.problems) == 2
    assert "turns.parquet has columns of other types than this farm writes" in run.problems[0]
    assert "assertions.parquet lacks the columns attempt, case_id, run_id, run_index" in run.problems[1]


def test_a_link_out_of_the_results_folder_is_no_run_and_is_not_read(tmp_path: Path):
    root = tmp_path / "results"
    write_run(root / "inside")
    outside = write_run(tmp_path / "elsewhere", "elsewhere")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "alias").symlink_to(root / "inside", target_is_directory=True)  # a link that stays inside is a run
    (root / ".cache").mkdir()
    (root / "notes").mkdir()
    assert [run.name for run in list_runs(root)] == ["alias", "inside"]
    with pytest.raises(UsageError, match="leads out of"):
        read_run(root / "escape", root=root)
    # a table that is a link out of the folder is not read either
    leaky = write_run(root / "leaky", "leaky")
    os.replace(outside / "turns.parquet", tmp_path / "secret-turns.parquet")
    (leaky / "turns.parquet").unlink()
    (leaky / "turns.parquet").symlink_to(tmp_path / "secret-turns.parquet")
    (run,) = [run for run in list_runs(root) if run.name == "leaky"]
    assert run.turns().num_rows == 0 and run.cases().num_rows == 4


def test_importing_farm_results_does_not_import_pyarrow():
    code = "import sys, farm.results; print('pyarrow' in sys.modules); farm.results.read_run; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_farm_results_exports_its_records_and_the_reader():
    import farm.results

    assert {"CASE_RUN_KEY", "CaseResult", "RunRecord", "list_runs", "read_run"} <= set(farm.results.__all__)
    for name in farm.results.__all__:
        assert getattr(farm.results, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'read_many'"):
        farm.results.read_many  # noqa: B018


# -- the suite of a case: what pairs it across runs -------------------------------------------------


def suite_run(folder: Path, sources: dict[str, str], **info: object) -> Path:
    """A finished run whose case ``id`` came from ``sources[id]``, with ``info`` in its run.json."""
    with ParquetWriter(folder) as parquet:
        for case_id, source in sources.items():
            parquet.write(case_result(case_id, Status.PASSED, run_id=folder.name, agent="A", source=source))
    write_run_json(folder, {"run_id": folder.name, "status": "finished", **info})
    return folder


def suites(run_dir: Path) -> dict[str, str]:
    cases = read_run(run_dir).cases(columns=["case_id", "suite"])
    return dict(zip(cases["case_id"].to_pylist(), cases["suite"].to_pylist(), strict=True))


def test_a_suite_file_is_one_suite_however_the_run_named_it(tmp_path: Path):
    project = tmp_path / "project"
    config = {"path": str(project / "farm.toml")}
    given = suite_run(tmp_path / "given", {"echo": "s.jsonl:1", "deep": "suites/../s.jsonl:4"}, cwd=str(project), config=config)
    absolute = suite_run(tmp_path / "absolute", {"echo": f"{project}/s.jsonl:9"}, cwd=str(tmp_path), config=config)
    below = suite_run(tmp_path / "below", {"echo": "../s.jsonl:1", "own": "s.jsonl:1"}, cwd=str(project / "sub"), config=config)
    outside = suite_run(tmp_path / "outside", {"echo": "/elsewhere/s.jsonl:1"}, cwd=str(project), config=config)
    assert suites(given) == {"echo": "s.jsonl", "deep": "s.jsonl"}
    assert suites(absolute) == {"echo": "s.jsonl"}  # started elsewhere, the file named by its absolute path
    assert suites(below) == {"echo": "s.jsonl", "own": "sub/s.jsonl"}  # relative to the project, not to where it started
    assert suites(outside) == {"echo": "/elsewhere/s.jsonl"}
    no_config = suite_run(tmp_path / "no-config", {"echo": f"{project}/s.jsonl:2"}, cwd=str(project))
    assert suites(no_config) == {"echo": "s.jsonl"}  # no farm.toml: the folder it started in is the project's
    assert read_run(given).suite_of("s.jsonl:7") == "s.jsonl"


def test_a_message_stdin_and_generated_cases_have_suites_of_their_own(tmp_path: Path):
    hello = suite_run(tmp_path / "hello", {"message": "<message>"}, input="hello there", cwd=str(tmp_path))
    bye = suite_run(tmp_path / "bye", {"message": "<message>"}, input="bye now", cwd=str(tmp_path))
    assert (suites(hello), suites(bye)) == ({"message": "hello there"}, {"message": "bye now"})
    piped = suite_run(tmp_path / "piped", {"echo": "<stdin>:3"}, input="-", cwd=str(tmp_path))
    assert suites(piped) == {"echo": "<stdin>"}
    generated = tmp_path / "results" / "generated"
    resumed_source = f"{generated}/generated.jsonl:2"  # a resumed generated run reads its first cases back
    suite_run(generated, {"gen-b1-1": "agents:gen batch 1, case 1", "refund": resumed_source}, input="agents:gen?count=2", cwd=str(tmp_path))
    assert suites(generated) == {"gen-b1-1": "agents:gen", "refund": "agents:gen"}
    rescored = suite_run(tmp_path / "results" / "rescored", {"refund": resumed_source}, input=f"{generated}/generated.jsonl", cwd=str(tmp_path))
    assert suites(rescored) == {"refund": "agents:gen"}  # farm rescore of it: the cases the generator wrote


def test_a_run_an_older_farm_wrote_reads_its_suites_from_its_sources(tmp_path: Path):
    with JSONLWriter(tmp_path / "old.jsonl") as jsonl:  # a results file: no run.json, so no cwd
        jsonl.write(case_result("echo", Status.PASSED, run_id="old", source="suites/s.jsonl:3"))
        jsonl.write(case_result("bare", Status.PASSED, run_id="old"))
    assert suites(tmp_path / "old.jsonl") == {"echo": "suites/s.jsonl", "bare": ""}
    assert read_run(tmp_path / "old.jsonl").cases()["suite"].to_pylist() == ["suites/s.jsonl", ""]


def test_tables_written_before_the_suite_column_read_it_from_the_cases_sources(tmp_path: Path):
    folder = write_run(tmp_path / "old", info={"cwd": str(tmp_path)})
    for table in ("cases", "turns", "assertions"):  # as a farm of schema 6 wrote them: no suite column
        path = folder / f"{table}.parquet"
        pq.write_table(pq.read_table(path).drop_columns(["suite"]), path)
    run = read_run(folder)
    assert set(run.cases(columns=["suite"])["suite"].to_pylist()) == {"suite.jsonl"}
    assert set(run.turns(columns=["case_id", "suite"])["suite"].to_pylist()) == {"suite.jsonl"}
    assert run.case_rows("turns", "greet", agent="A", suite="suite.jsonl").num_rows == 2
    assert run.problems == []


def test_two_suites_case_of_one_id_are_two_cases_in_every_table(tmp_path: Path):
    folder = tmp_path / "run"
    with ParquetWriter(folder) as parquet:
        for suite in ("a.jsonl", "b.jsonl"):
            parquet.write(case_result("greet", Status.PASSED, run_id="run", agent="A", source=f"{suite}:1",
                                      turns=[TurnResult(turn=1, input="hi", output=f"{suite} says hello")]))  # fmt: skip
    write_run_json(folder, {"run_id": "run", "status": "finished", "cwd": str(tmp_path)})
    run = read_run(folder)
    assert run.cases(columns=["suite", "case_id"]).to_pylist() == [{"suite": "a.jsonl", "case_id": "greet"}, {"suite": "b.jsonl", "case_id": "greet"}]
    turns = run.turns(columns=["suite", "output"]).to_pylist()
    assert turns == [{"suite": "a.jsonl", "output": "a.jsonl says hello"}, {"suite": "b.jsonl", "output": "b.jsonl says hello"}]
    assert run.case_rows("turns", "greet", suite="b.jsonl")["output"].to_pylist() == ["b.jsonl says hello"]
