"""OpenTelemetry export of the decision traces: a span tree per request, sent over OTLP/HTTP.

:func:`build_otel_sink` makes the sink from the ``otel:`` section; the gateway hands it to its
:class:`~ingest.pipeline.emitter.TraceEmitter` as an exporter (best-effort, off the request
path) and registers :class:`OtelCollector` on its ``/metrics``.
"""

from ingest.otel.build import EXPORTER_NAME, build_otel_sink, traces_endpoint
from ingest.otel.metrics import OtelCollector
from ingest.otel.sink import OtelStats, OtlpExportFailed, OtlpSink, Transport
from ingest.otel.spans import PlainSpan, SpanBuilder, ids_of, to_readable, trace_url
from ingest.otel.transport import OtlpHttp
from ingest.otel.wire import encode_request

__all__ = [
    "EXPORTER_NAME",
    "OtelCollector",
    "OtelStats",
    "OtlpExportFailed",
    "OtlpHttp",
    "OtlpSink",
    "PlainSpan",
    "SpanBuilder",
    "Transport",
    "build_otel_sink",
    "encode_request",
    "ids_of",
    "to_readable",
    "trace_url",
    "traces_endpoint",
]
