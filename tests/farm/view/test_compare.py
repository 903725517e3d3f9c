"""``farm view``'s compare page pairs a case only with the same case: the same suite and id, the
suite as the results reader works it out. Run folders written by the farm's own writers."""

from __future__ import annotations

from pathlib import Path

from farm.results import CaseResult, Status
from farm.view import ViewApp
from farm.writers import ParquetWriter, RunInfo, write_run_json

from .conftest import T0


def write_run(root: Path, name: str, cases: dict[str, tuple[str, Status]], *, cwd: Path, started: float) -> None:
    """A finished run of the project in ``root``'s folder, started in ``cwd``, whose case ``id`` came
    from ``cases[id][0]`` and ended ``cases[id][1]``."""
    config = {"path": str(root.parent / "farm.toml")}
    with ParquetWriter(root / name) as writer:
        for case_id, (source, status) in cases.items():
            writer.write(CaseResult(run_id=name, id=case_id, status=status, agent="bot", source=source, started_at=started))
    write_run_json(root / name, RunInfo(run_id=name, status="finished", started_at=started, agent="bot", agents=["bot"], cwd=str(cwd), config=config))


def test_two_runs_of_different_suites_with_a_same_named_case_are_not_compared(tmp_path: Path):
    root = tmp_path / "results"
    write_run(root, "run-a", {"echo": ("a.jsonl:1", Status.PASSED)}, cwd=tmp_path, started=T0)
    write_run(root, "run-b", {"echo": ("b.jsonl:1", Status.FAILED)}, cwd=tmp_path, started=T0 + 60)
    data = ViewApp(str(root)).answer(["compare"], {"a": ["run-a"], "b": ["run-b"]})
    assert (data["changes"]["regression"], data["changes"]["only_a"], data["changes"]["only_b"]) == (0, 1, 1)
    assert [(row["suite"], row["change"]) for row in data["rows"]] == [("a.jsonl", "only_a"), ("b.jsonl", "only_b")]
    stats = data["statistics"]
    assert (stats["paired"], stats["difference"], stats["p_value"]) == (0, None, None)  # no figure of a comparison
    assert stats["sentence"] == "run-a and run-b have no case in common (the same suite and case id), so they are not compared."


def test_a_suite_named_relatively_and_absolutely_pairs_and_what_one_side_ran_is_left_out(tmp_path: Path):
    root = tmp_path / "results"
    write_run(root, "run-a", {"echo": ("s.jsonl:1", Status.PASSED), "gone": ("s.jsonl:2", Status.PASSED)}, cwd=tmp_path, started=T0)
    write_run(root, "run-b", {"echo": (f"{tmp_path}/s.jsonl:1", Status.FAILED)}, cwd=tmp_path / "elsewhere", started=T0 + 60)
    data = ViewApp(str(root)).answer(["compare"], {"a": ["run-a"], "b": ["run-b"]})
    assert [(row["case_id"], row["suite"], row["change"]) for row in data["rows"]] == [("echo", "s.jsonl", "regression"), ("gone", "s.jsonl", "only_a")]
    stats = data["statistics"]
    assert (stats["paired"], stats["a_only"], stats["difference"]) == (1, 1, -1.0)
    assert stats["pairing"] == "run-a and run-b are compared on the 1 case both ran (the same suite and case id), leaving out 1 case that only one of them ran."


def test_a_try_a_role_broke_is_no_failure_of_the_agent_as_the_gate_and_farm_report_count_it(tmp_path: Path):
    root = tmp_path / "results"
    config = {"path": str(tmp_path / "farm.toml")}
    for name, started, broken in (("run-a", T0, False), ("run-b", T0 + 60, True)):
        with ParquetWriter(root / name) as writer:
            writer.write(CaseResult(run_id=name, id="steady", status=Status.PASSED, agent="bot", source="s.jsonl:1", started_at=started))
            error = {"status": Status.ERROR, "error": "simulator error: no JSON", "error_role": "simulator"} if broken else {"status": Status.PASSED}
            writer.write(CaseResult(run_id=name, id="dyn", agent="bot", source="s.jsonl:2", started_at=started, **error))
        write_run_json(root / name, RunInfo(run_id=name, status="finished", started_at=started, agent="bot", agents=["bot"], cwd=str(tmp_path), config=config))
    data = ViewApp(str(root)).answer(["compare"], {"a": ["run-a"], "b": ["run-b"]})
    assert data["changes"]["regression"] == 0  # the simulator broke, not the agent
    assert data["statistics"]["paired"] == 1  # only the case judged on both sides
