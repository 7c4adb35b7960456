"""The OTLP exporter: one more sink of the trace pipeline, beside the store.

The emitter offers it every record it spools (:mod:`ingest.pipeline.export_queue`: a bounded
queue and a thread of its own, so the request path never waits for it); it gets traces as JSON,
the gateway's own unvalidated (the store validates them), and refuses (counted) one it cannot
build spans from. ``prepare`` samples each trace and builds its span tree
(:class:`ingest.otel.spans.SpanBuilder`); ``write`` encodes a batch's spans as one OTLP protobuf
body (:mod:`ingest.otel.wire`) and sends it in one request (:mod:`ingest.otel.transport`, which
retries transient failures within its timeout). A batch it could not send is dropped and counted
(``routelens_otel_spans_dropped_total``): the store has every trace, and replaying spans to a
tracing backend hours late helps no one.

Sampling is decided on the trace id, as OpenTelemetry's ``TraceIdRatioBased`` sampler decides it
(its lower 64 bits below ``ratio * 2**64``), so services sampling at the same ratio keep the same
traces; a request that ended in an error or a fallback is exported whatever its draw.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ingest.kinds import Kind
from ingest.otel.spans import PlainSpan, SpanBuilder, ids_of
from ingest.otel.wire import encode_request
from ingest.record_sink import PreparedBatch, RecordBatch, Rejected, WriteResult

__all__ = ["OtelStats", "OtlpSink", "Transport", "is_sampled"]

log = logging.getLogger(__name__)
_MASK = (1 << 64) - 1


class Transport(Protocol):
    """What the sink sends bodies with (:class:`ingest.otel.transport.OtlpHttp`, or a memory one in tests)."""

    def send(self, body: bytes) -> bool:
        """Send one ``ExportTraceServiceRequest``; True when the receiver took it."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


@dataclass
class OtelStats:
    """What the exporter did (read by :class:`ingest.otel.metrics.OtelCollector`).

    Attributes:
        exported: Spans the receiver accepted.
        dropped: Spans built but not delivered (the receiver down, refusing, or too slow).
        traces_sampled: Traces turned into spans.
        traces_unsampled: Traces the ratio left out (neither an error nor a fallback).
        failed_exports: Export requests that failed.
    """

    exported: int = 0
    dropped: int = 0
    traces_sampled: int = 0
    traces_unsampled: int = 0
    failed_exports: int = 0


def is_sampled(trace_id: str, ratio: float) -> bool:
    """Whether the ratio keeps this trace (``TraceIdRatioBased``'s rule on its lower 64 bits)."""
    if ratio >= 1.0:
        return True
    return int(trace_id, 16) & _MASK < round(ratio * (1 << 64))


def wanted(trace: dict[str, Any], ratio: float) -> bool:
    """Errors and fallbacks always; the rest by the ratio on the trace id."""
    if trace["outcome"]["status"] != "ok" or trace["fallback_triggered"]:
        return True
    return is_sampled(ids_of(trace)[0], ratio)


def _encodes(span: PlainSpan) -> bool:
    try:
        encode_request({}, ("", None), [span])
    except (TypeError, ValueError, OverflowError):
        return False
    return True


class OtlpSink:
    """A :class:`~ingest.record_sink.RecordSink` that exports traces as spans.

    Args:
        transport: Sends the encoded bodies.
        builder: Turns a trace into spans.
        resource: The resource's attributes (service.name and the rest).
        scope: The instrumentation scope's name and version.
        sample_ratio: Share of ordinary requests exported (see :func:`wanted`).
        stats: Its counters (a fresh set when None).
    """

    def __init__(self, transport: Transport, builder: SpanBuilder, resource: Mapping[str, Any], *,
                 scope: tuple[str, str | None] = ("routelens", None), sample_ratio: float = 1.0,
                 stats: OtelStats | None = None) -> None:
        self.transport = transport
        self.builder = builder
        self.resource = dict(resource)
        self.scope = scope
        self.sample_ratio = sample_ratio
        self.stats = stats or OtelStats()

    def prepare(self, batch: RecordBatch) -> PreparedBatch:
        """Sample the batch's traces and build their spans (other kinds of records are ignored)."""
        out = PreparedBatch(batch)
        spans: list[PlainSpan] = []
        for payload in (*batch.payloads.get(Kind.TRACE, ()), *batch.payloads.get(Kind.TRACE_UNCHECKED, ())):
            try:
                trace = orjson.loads(payload)
                if not wanted(trace, self.sample_ratio):
                    self.stats.traces_unsampled += 1
                    continue
                spans += self.builder.spans(trace)
                self.stats.traces_sampled += 1
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                out.rejected.append(Rejected(Kind.TRACE, payload, f"no spans: {type(exc).__name__}: {exc}"))
        out.tables[Kind.TRACE] = spans
        return out

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Export the batch's spans in one request; when that fails they are dropped, counted."""
        spans = prepared.tables.get(Kind.TRACE) or []
        result = WriteResult(rejected=list(prepared.rejected))
        if not spans:
            return result
        try:
            body, spans = self._encode(spans)
            ok = self.transport.send(body)
        except Exception as exc:  # noqa: BLE001  (the exporter's fault must not stop the pipeline's thread)
            log.warning("OTLP export failed (%s: %s)", type(exc).__name__, exc)
            ok = False
        if ok:
            self.stats.exported += len(spans)
        else:
            self.stats.failed_exports += 1
            self.stats.dropped += len(spans)
            log.warning("OTLP export failed: %d spans dropped (%d so far)", len(spans), self.stats.dropped)
        return result

    def _encode(self, spans: list[PlainSpan]) -> tuple[bytes, list[PlainSpan]]:
        """The request body and the spans in it: one whose values cannot be encoded is left out, counted."""
        try:
            return encode_request(self.resource, self.scope, spans), spans
        except (TypeError, ValueError, OverflowError):
            kept = [span for span in spans if _encodes(span)]
            self.stats.dropped += len(spans) - len(kept)
            return encode_request(self.resource, self.scope, kept), kept

    def idle(self) -> None:
        """Nothing is deferred."""

    def close(self) -> None:
        """Close the transport."""
        self.transport.close()
