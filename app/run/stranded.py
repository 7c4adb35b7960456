"""Spools left by gateway workers this ``serve`` does not run, delivered to the store.

Worker N keeps its undelivered records in a spool of its own (``<trace file>.spool.gateway-N``)
and replays it when it starts again. A ``serve`` started with fewer workers than the last one
(``--workers``, or ``gateway.workers: auto`` on a machine with fewer cores) starts no worker N for
the higher numbers, so their records would wait there for ever. :func:`deliver_stranded` gives each
such spool a trace pipeline of its own, relaying to the store like a worker's, until it is empty.
With the store in the gateway's process (``--store-in-process``) a second pipeline cannot write the
same file: it names the spools and says how to deliver them instead.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

from app.run.storage import pipeline_paths, quarantine_in, worker_paths
from ingest import RecordSink, TraceEmitter, spool_backlog
from schemas.config.storage import StorageSettings

__all__ = ["Delivery", "deliver_stranded", "stranded_workers"]

log = logging.getLogger(__name__)
_DRAIN_S = 600.0  # how long a delivery keeps trying before it leaves the rest to the next start


def stranded_workers(st: StorageSettings, db_path: str, workers: int) -> list[int]:
    """The numbers of the workers, ``workers`` and up, whose spool folder is still there."""
    spool, _ = pipeline_paths(st, db_path)
    pattern = re.compile(re.escape(spool.name) + r"\.gateway-(\d+)")
    found = [int(m.group(1)) for p in spool.parent.glob(spool.name + ".gateway-*")
             if p.is_dir() and (m := pattern.fullmatch(p.name))]
    return sorted(n for n in found if n >= workers)


class Delivery:
    """One stranded worker's spool, replayed to the store on a thread of its own until it is empty."""

    def __init__(self, worker: int, emitter: TraceEmitter) -> None:
        self.worker, self.emitter = worker, emitter
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stranded-gateway-{worker}", daemon=True)

    def start(self) -> Delivery:
        """Start waiting for the spool to empty (the pipeline delivers on its own threads)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        deadline = time.monotonic() + _DRAIN_S
        while self.emitter.backlog_size() and time.monotonic() < deadline and not self.done.is_set():
            self.done.wait(0.2)
        left = self.emitter.backlog_size()
        if left:
            log.warning("gateway-%d's spool: %d records still undelivered; they are replayed at the next start",
                        self.worker, left)
        else:
            log.info("gateway-%d's spool delivered to the store", self.worker)
        self.done.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop waiting and close the pipeline (what the store has not taken stays in the spool)."""
        self.done.set()
        self._thread.join(timeout_s)
        self.emitter.close(timeout_s)


def deliver_stranded(st: StorageSettings, db_path: str, workers: int, relay: Callable[[], RecordSink] | None,
                     say: Callable[[str], None]) -> list[Delivery]:
    """Start delivering the spools of workers ``workers`` and up; ``relay`` makes a sink to the store.

    ``relay`` None (the store in this process): nothing is started; ``say`` names the spools.
    """
    numbers = stranded_workers(st, db_path, workers)
    if not numbers:
        return []
    if relay is None:  # a spool folder a clean stop emptied holds nothing: only those with records are named
        held = {n: spool_backlog(worker_paths(st, db_path, n)[0]) for n in numbers}
        if numbers := [n for n in numbers if held[n]]:
            say(f"warning: the spools of gateway-{', gateway-'.join(map(str, numbers))} hold "
                f"{sum(held.values())} records this serve does not deliver (the store is in its process); serve "
                f"with --workers {numbers[-1] + 1} and a store process to deliver them")
        return []
    out = []
    for n in numbers:
        spool, quarantine = worker_paths(st, db_path, n)
        emitter = TraceEmitter(relay(), st, spool_dir=spool, quarantine=quarantine_in(st, quarantine)).start()
        if not emitter.backlog_size():
            emitter.close()
            continue
        say(f"gateway-{n}'s spool ({spool}) holds {emitter.backlog_size()} records from a worker this serve "
            "does not run: delivering them to the store")
        out.append(Delivery(n, emitter).start())
    return out
