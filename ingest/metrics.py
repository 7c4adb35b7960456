"""Exports the emitter's counters to Prometheus (read at scrape time, never double-counted)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ingest.emitter import TraceEmitter

__all__ = ["EmitterCollector"]


class EmitterCollector(Collector):
    """``routelens_traces_{queued,written,dropped,sink_errors}_total`` and the pending gauge."""

    def __init__(self, emitter: TraceEmitter) -> None:
        self._emitter = emitter

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        """Yield the current values."""
        stats = self._emitter.stats
        for name, value, doc in (
            ("queued", stats.queued, "Traces accepted by the emitter."),
            ("written", stats.written, "Traces committed to the sink."),
            ("dropped", stats.dropped, "Traces lost (queue full); stays 0 in normal operation."),
            ("sink_errors", stats.sink_errors, "Failed batch writes (retried)."),
        ):
            yield CounterMetricFamily(f"routelens_traces_{name}", doc, value=value)
        yield GaugeMetricFamily("routelens_traces_pending", "Traces not yet committed.", value=self._emitter.backlog())
