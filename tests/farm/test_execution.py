"""What ``execute`` does to the process around the cases it runs."""

from __future__ import annotations

import gc

from farm.execution import YOUNG_THRESHOLD, _collector_for_the_run


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
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
