"""Exports the pipeline's counters to Prometheus (read at scrape time, never double-counted).

Counters ``routelens_traces_<name>_total`` count records of every kind (traces, snapshots,
probe results, events, feedback, quarantine records); see :class:`ingest.pipeline.stats.PipelineStats`.
``routelens_records_written_total`` and ``routelens_records_duplicates_total`` split the first two
by ``kind``. Each sink's own counters (:class:`ingest.pipeline.stats.SinkStats`) carry a ``sink``
label (``store``, or an exporter's name): ``routelens_sink_{delivered,rejected,dropped}_records_total``,
``routelens_sink_{failed,retried}_writes_total`` and the gauge ``routelens_sink_queued_records``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ingest.kinds import KINDS
from ingest.pipeline.emitter import TraceEmitter
from ingest.pipeline.stats import COUNTERS, STORE

__all__ = ["EmitterCollector"]

_DOCS = {
    "queued": "Records accepted by emit().",
    "spooled": "Records written to the durable spool.",
    "replayed": "Records found in the spool at start-up and delivered.",
    "written": "Records committed to the sink.",
    "duplicates": "Records the sink already held: the same record under the same id (a re-delivery).",
    "quarantined": "Records refused and kept with a reason.",
    "dropped": "Records lost on purpose (drop_oldest policy of a full spool); 0 otherwise.",
    "corrupted": "Records lost to a damaged spool segment.",
    "sink_errors": "Failed batch writes (each retried).",
    "spool_errors": "Times the spool could not take a record (full or unwritable).",
}
# SinkStats field -> (metric name, help)
_SINK = {
    "delivered": ("routelens_sink_delivered_records", "Records each sink took (stored, already held, sent on)."),
    "rejected": ("routelens_sink_rejected_records",
                 "Records each sink refused one by one (the store's are quarantined)."),
    "dropped": ("routelens_sink_dropped_records",
                "Records each sink gave up (an exporter: queue full, retries spent, failure)."),
    "failed": ("routelens_sink_failed_writes", "Batch writes that failed, by sink."),
    "retried": ("routelens_sink_retried_writes", "Batch writes made again after a failure, by sink."),
}


class EmitterCollector(Collector):
    """The pipeline counters, the backlog, spool size and whether ``emit()`` is blocked now."""

    def __init__(self, emitter: TraceEmitter) -> None:
        self._emitter = emitter

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Yield the current values."""
        em = self._emitter
        for name in COUNTERS:
            doc = _DOCS.get(name) or name
            yield CounterMetricFamily(f"routelens_traces_{name}", doc, value=getattr(em.stats, name))
        written = CounterMetricFamily("routelens_records_written", "Records committed to the sink, by kind.",
                                      labels=["kind"])
        duplicates = CounterMetricFamily("routelens_records_duplicates",
                                         "Records the sink already held, by kind.", labels=["kind"])
        for kind, (w, d) in sorted(em.stats.by_kind.items()):
            written.add_metric([KINDS[kind].name], w)
            duplicates.add_metric([KINDS[kind].name], d)
        yield written
        yield duplicates
        yield from self._sinks()
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

    def _sinks(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        em = self._emitter
        sinks = em.stats.sinks
        for field, (name, doc) in _SINK.items():
            family = CounterMetricFamily(name, doc, labels=["sink"])
            for sink, stats in sinks.items():
                family.add_metric([sink], getattr(stats, field))
            yield family
        queued = GaugeMetricFamily("routelens_sink_queued_records", "Records waiting for each sink.", labels=["sink"])
        queued.add_metric([STORE], em.backlog_size())
        for export in em.exporters:
            queued.add_metric([export.name], export.queued)
        yield queued
