"""The collector as the serving processes tune it (:mod:`app.run.gc_tuning`), for one replay's duration."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from app.run.gc_tuning import THRESHOLDS

__all__ = ["fewer_collections"]


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Freeze what exists and raise the thresholds until the block ends (a process that froze its own keeps them).

    A replay makes many small objects (rows, memo entries, a verified trace's candidates and
    states) and few cycles; with Python's default thresholds the full collections walking them
    took about a third of a range replay's reading time, and 60% of ``replay --verify``'s time at
    200 candidates a trace (17.2 s against 7.2 s for 1,000 traces, ``python -m bench.replay_big``).
    """
    before, freeze = gc.get_threshold(), gc.get_freeze_count() == 0
    if freeze:
        gc.collect()
        gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if freeze:
            gc.unfreeze()
