"""Wait for a RouteLens gateway's trace pipeline to drain: the CPU of a load includes the storing of its traces.

A gateway answers first and stores the request's trace afterwards, on its pipeline's threads,
up to ``storage.flush_interval_ms`` later (and exports it, on the exporter's). A benchmark that
reads a gateway's CPU as soon as its load ends misses the last batch's work, and one that
interleaves paths hands that work to whichever path runs next. :func:`drained` waits until the
gateway's ``/metrics`` say nothing is left (``routelens_traces_pending`` and every
``routelens_sink_queued_records`` at 0) before the CPU is read. With several workers behind one
port a scrape reaches one of them: it waits for ``confirm`` zero readings in a row. A gateway
relays its records to a store process (``serve`` starts one unless ``storage.separate_process`` is
false): given that store's URL, read from the gateway's output (:func:`store_url_of`), the wait
covers the store's own pipeline too.
The wait itself is counted: what the gateway spends meanwhile (its scrape and upkeep loops) is
charged to the slice, a few percent more at c=1 with a long flush interval.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["drained", "left_in_pipeline", "metric_total", "store_url_of"]

_STORE_READY = re.compile(r"\[store\] store ready (http://\S+)")
_LEFT = {"routelens_traces_pending", "routelens_sink_queued_records"}  # the backlog, and each sink's queue


def metric_total(metrics_text: str, names: set[str] | frozenset[str]) -> float:
    """The sum of every sample named one of ``names`` (any labels) in a ``/metrics`` text (0 when none is)."""
    return sum(sample.value for family in text_string_to_metric_families(metrics_text)
               for sample in family.samples if sample.name in names)


def left_in_pipeline(metrics_text: str) -> float:
    """Records emitted and not yet stored or exported, from a gateway's ``/metrics`` text (0 when none is said)."""
    return metric_total(metrics_text, _LEFT)


def store_url_of(output: str) -> str | None:
    """The store process a ``serve`` started, from its output (its ``[store] store ready URL`` line; None: none)."""
    found = _STORE_READY.search(output)
    return found.group(1) if found else None


def drained(metrics_url: str, *, timeout_s: float = 10.0, confirm: int = 1, poll_s: float = 0.05,
            store_url: str | None = None) -> Callable[[], bool]:
    """A ``settle`` for :func:`bench.wrk.run`: it returns True once the pipeline is empty, False at the timeout.

    ``store_url``: the store process the gateway relays to (:func:`store_url_of`); its own pipeline
    is waited for too, once the gateway's is empty (the store has then been handed every record).
    """

    def empty(url: str, deadline: float, in_a_row: int) -> bool:
        zeros = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    text = resp.read().decode()
            except OSError:
                zeros = 0
            else:
                zeros = zeros + 1 if left_in_pipeline(text) == 0 else 0
                if zeros >= in_a_row:
                    return True
            time.sleep(poll_s)
        return False

    def wait() -> bool:
        deadline = time.monotonic() + timeout_s
        if not empty(metrics_url, deadline, confirm):
            return False
        return store_url is None or empty(f"{store_url}/metrics", deadline, 1)

    return wait
