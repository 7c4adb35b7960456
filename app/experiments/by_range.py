"""One job over a trace file's window, cut into time ranges of about equal size, one forked process each.

:func:`run_by_range` counts the matching traces and, from ``parallel_min`` of them, cuts the window
at timestamps that split them evenly (:func:`app.experiments.bulk.split_points`), runs ``part`` on
each range in its own process (forked: by default one per core, up to 2) and returns the results
in time order, whichever finished first. Below ``parallel_min``, or with one worker, ``part`` runs
in this process over the whole window. ``replay --db`` (:mod:`app.experiments.replay_range`) and
``replay --verify --db`` (:mod:`app.experiments.verify`) both run through it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.experiments import bulk
from schemas.queries import TraceFilter

__all__ = ["run_by_range"]

T = TypeVar("T")


def _worker(part: int, job: Callable[[Path, TraceFilter], Any], path: Path, flt: TraceFilter, results: Any) -> None:
    """A worker process: run ``job`` on one range, put ``(part, True, result)`` or ``(part, False, message)``."""
    try:
        results.put((part, True, job(path, flt)))
    except Exception as exc:  # noqa: BLE001  (the parent reports it)
        results.put((part, False, f"{type(exc).__name__}: {exc}"))


def run_by_range(path: Path, flt: TraceFilter, job: Callable[[Path, TraceFilter], T], *, workers: int | None,
                 parallel_min: int, waiting: Callable[[int], None] | None = None) -> list[T]:
    """``job(path, range)`` for each time range of ``flt``'s window (which must have a start and an end).

    Args:
        path: A trace file no process writes.
        flt: The traces; its ``start`` and ``end`` bound the window.
        job: Runs over one range; its result must pickle.
        workers: Processes (None: one per core, up to 2, from ``parallel_min`` traces).
        parallel_min: Matching traces from which the default forks.
        waiting: Called with the matching traces' count now and then while the ranges run, and once
            they are done (a progress line; the jobs count what they did themselves).

    Raises:
        duckdb.Error: The file is missing, locked by a writer or not a DuckDB file.
        RuntimeError: A worker process failed.
    """
    if workers == 1 and waiting is None:
        return [job(path, flt)]
    con = bulk.open_file(path)
    try:
        total = bulk.count(con, flt)
        parts = workers or (min(os.cpu_count() or 1, 2) if total >= parallel_min else 1)
        cuts = bulk.split_points(con, flt, parts) if total else []
    finally:
        con.close()
    bounds = [flt.start, *cuts, flt.end]
    ranges = [flt.model_copy(update={"start": lo, "end": hi}) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    if len(ranges) == 1:
        out = [job(path, flt)]
        if waiting is not None:
            waiting(total)
        return out
    ctx = mp.get_context("fork")
    results: Any = ctx.SimpleQueue()
    procs = [ctx.Process(target=_worker, args=(i, job, path, r, results), daemon=True) for i, r in enumerate(ranges)]
    for proc in procs:
        proc.start()
    done: dict[int, T] = {}
    errors: list[str] = []
    try:
        while len(done) + len(errors) < len(procs):
            if results.empty():
                if waiting is not None:
                    waiting(total)
                if not any(proc.is_alive() for proc in procs) and results.empty():
                    break
                time.sleep(0.05)
                continue
            part, ok, value = results.get()
            if ok:
                done[part] = value
            else:
                errors.append(value)
    finally:
        for proc in procs:
            proc.join(timeout=5)
    if errors or len(done) < len(procs):
        raise RuntimeError(f"a worker process failed: {errors[0] if errors else 'it exited without a result'}")
    if waiting is not None:
        waiting(total)
    return [done[part] for part in sorted(done)]
