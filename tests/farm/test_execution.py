"""What ``execute`` does to the process around the cases it runs."""

from __future__ import annotations

import gc

from farm.execution import YOUNG_THRESHOLD, _collector_for_the_run


def test_the_collector_is_set_for_the_run_and_restored_after():
    thresholds = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with _collector_for_the_run():
        assert gc.get_freeze_count() > 0  # what was loaded before is out of the collector's passes
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *thresholds[1:])
    assert gc.get_freeze_count() == 0
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
