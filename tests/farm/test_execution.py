"""What ``execute`` does to the process around the cases it runs."""

from __future__ import annotations

import gc
import time

import pytest

from farm._run import execution as execution
from farm._run.execution import YOUNG_THRESHOLD, _collector_for_the_run


@pytest.fixture(autouse=True)
def no_run_in_progress():
    """The collector's settings are the process's: wait until a run an earlier test started in a
    thread of its own (a notebook-style call) has ended, so that these tests see only their own."""
    deadline = time.monotonic() + 30
    while execution._collector_runs and time.monotonic() < deadline:
        time.sleep(0.05)
    assert execution._collector_runs == 0, "a run of an earlier test is still going"


def test_the_collector_is_set_for_the_runs_and_restored_when_the_last_ends():
    thresholds = gc.get_threshold()
    with _collector_for_the_run():
        assert gc.get_freeze_count() > 0  # what was loaded before is out of the collector's passes
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        with _collector_for_the_run():  # a concurrent run
            pass
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # the first run still runs
    assert gc.get_threshold() == thresholds


def test_a_process_that_froze_its_heap_keeps_its_policy():
    thresholds = gc.get_threshold()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _collector_for_the_run():
            assert gc.get_threshold() == thresholds
        # still frozen, and not frozen again: a frozen object that reference counting frees meanwhile
        # leaves the count, so it may only have fallen, never to 0
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()


def test_an_engine_that_cannot_start_leaves_a_run_marked_not_started(tmp_path):
    """Something listens at the address but is not Ray: the run folder says so, not "finished"."""
    import json

    import pytest

    from farm._run.execution import RunOutputs, execute
    from farm.config import FarmConfig
    from farm.conversation.settings import RunSettings
    from farm.engines import RunPlan
    from farm.writers import RunInfo

    class Broken:
        name = "ray"
        starting = None

        def start(self, run_dir=None):
            raise ConnectionError("not a Ray cluster")

        def run(self, plan, on_result):  # pragma: no cover - never reached
            raise AssertionError("run after a failed start")

        def close(self):
            pass

    plan = RunPlan(config=FarmConfig(), cases=[], settings=RunSettings(agent_id="a", run_id="r"), parallel=1)
    outputs = RunOutputs(run_dir=tmp_path, jsonl=tmp_path / "results.jsonl")
    with pytest.raises(ConnectionError):
        execute(plan, outputs, Broken(), info=RunInfo(run_id="r"))
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "not_started"
