import gc
from collections.abc import Iterator

import pytest

from app.run.gc_tuning import THRESHOLDS, tame_gc


@pytest.fixture
def restored_gc() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


@pytest.mark.usefixtures("restored_gc")
def test_start_up_objects_leave_later_collections_and_young_ones_are_rarer() -> None:
    kept = [object() for _ in range(10)] + [[i] for i in range(1000)]  # start-up state, GC-tracked lists
    tame_gc()
    assert gc.get_freeze_count() >= 1000
    assert gc.get_threshold() == THRESHOLDS and THRESHOLDS[0] > 700  # Python's default first threshold
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1  # cycles are still collected
    assert kept
