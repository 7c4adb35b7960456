"""The exporter's counters on ``/metrics``: ``routelens_otel_spans_{exported,dropped}_total`` and the rest.

Read at scrape time from :class:`ingest.otel.sink.OtelStats` (never double-counted). These count
spans; the pipeline's ``routelens_sink_{delivered,dropped}_records_total{sink="otel"}`` count
records: delivered when the receiver took their spans (or they had none to send), dropped when
the exporter's queue was full or their export failed (its spans are ``..._spans_dropped_total``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ingest.otel.sink import OtelStats

__all__ = ["OtelCollector"]

_COUNTERS = (
    ("routelens_otel_spans_exported", "exported", "Spans the OTLP receiver accepted."),
    ("routelens_otel_spans_dropped", "dropped", "Spans built but not delivered (receiver down, refusing or too slow)."),
    ("routelens_otel_spans_failed_exports", "failed_exports", "OTLP export requests that failed."),
    ("routelens_otel_traces_sampled", "traces_sampled", "Decision traces exported as spans."),
    ("routelens_otel_traces_unsampled", "traces_unsampled",
     "Decision traces the sample ratio left out (errors and fallbacks are always exported)."),
)


class OtelCollector(Collector):
    """Exports one exporter's :class:`OtelStats`."""

    def __init__(self, stats: OtelStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[CounterMetricFamily]:
        """Yield the current values."""
        for name, field, doc in _COUNTERS:
            yield CounterMetricFamily(name, doc, value=getattr(self._stats, field))
