"""OpenTelemetry export of the decision traces: a span tree per request, sent over OTLP/HTTP.

:func:`build_otel_sink` makes the sink from the ``otel:`` section; the gateway hands it to its
:class:`~ingest.pipeline.emitter.TraceEmitter` as an exporter (best-effort, off the request
path) and registers :class:`OtelCollector` on its ``/metrics``.
"""

from ingest.otel.build import EXPORTER_NAME, build_otel_sink, traces_endpoint
from ingest.otel.metrics import OtelCollector
from ingest.otel.sink import OtelStats, OtlpSink, SpanExporter, is_sampled
from ingest.otel.spans import SpanBuilder, ids_of, trace_url

__all__ = [
    "EXPORTER_NAME",
    "OtelCollector",
    "OtelStats",
    "OtlpSink",
    "SpanBuilder",
    "SpanExporter",
    "build_otel_sink",
    "ids_of",
    "is_sampled",
    "trace_url",
    "traces_endpoint",
]
