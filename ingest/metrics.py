"""Exports the pipeline's counters to Prometheus (read at scrape time, never double-counted).

Counters ``routelens_traces_<name>_total`` count records of every kind (traces, snapshots,
probe results, events, feedback, quarantine records); see :class:`ingest.stats.PipelineStats`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ingest.emitter import TraceEmitter
from ingest.stats import PipelineStats

__all__ = ["EmitterCollector"]

_DOCS = {
    "queued": "Records accepted by emit().",
    "spooled": "Records written to the durable spool.",
    "replayed": "Records found in the spool at start-up and delivered.",
    "written": "Records committed to the sink.",
    "duplicates": "Records the sink already held under the same id.",
    "quarantined": "Records refused and kept with a reason.",
    "dropped": "Records lost on purpose (drop_oldest policy of a full spool); 0 otherwise.",
    "corrupted": "Records lost to a damaged spool segment.",
    "sink_errors": "Failed batch writes (each retried).",
    "spool_errors": "Times the spool could not take a record (full or unwritable).",
}


class EmitterCollector(Collector):
    """The pipeline counters, the backlog, spool size and whether ``emit()`` is blocked now."""

    def __init__(self, emitter: TraceEmitter) -> None:
        self._emitter = emitter

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Yield the current values."""
        em = self._emitter
        for f in fields(PipelineStats):
            doc = _DOCS.get(f.name) or f.name
            yield CounterMetricFamily(f"routelens_traces_{f.name}", doc, value=getattr(em.stats, f.name))
        backlog = em.backlog
        spool = backlog.spool
        yield GaugeMetricFamily("routelens_traces_pending", "Records emitted, not yet stored.", value=em.backlog_size())
        yield GaugeMetricFamily(
            "routelens_spool_bytes", "Disk the spool segments take.", value=spool.disk_bytes() if spool else 0
        )
        yield GaugeMetricFamily(
            "routelens_spool_available",
            "1 while records are written to the durable spool, 0 while held in memory only.",
            value=1 if spool is not None and backlog.spool_ok else 0,
        )
        yield GaugeMetricFamily(
            "routelens_spool_emit_blocked", "1 while emit() waits for spool room (policy block).",
            value=1 if backlog.blocked else 0,
        )
