"""What ``execute`` does to the process around the cases it runs."""

from __future__ import annotations

import gc

from farm.execution import _loaded_heap_frozen


def test_the_heap_frozen_for_the_cases_is_unfrozen_after():
    assert gc.get_freeze_count() == 0
    with _loaded_heap_frozen():
        assert gc.get_freeze_count() > 0  # what was loaded before is out of the collector's passes
    assert gc.get_freeze_count() == 0


def test_a_heap_the_process_froze_itself_stays_frozen():
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with _loaded_heap_frozen():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
