"""The OTLP exporter: one more sink of the trace pipeline, beside the store.

The emitter offers it every record it spools (:mod:`ingest.pipeline.export_queue`: a bounded
queue and a thread of its own, so the request path never waits for it); it gets traces as JSON,
the gateway's own unvalidated (the store validates them), and refuses (counted) one it cannot
build spans from. ``prepare`` samples each trace, builds its span tree
(:class:`ingest.otel.spans.SpanBuilder`) and encodes the spans as OTLP protobuf
(:mod:`ingest.otel.wire`) :data:`CHUNK` traces at a time, both in one C call where the extension
is built (:data:`ingest.otel.wire.encode_traces`); ``write`` sends the batch in one request
(:mod:`ingest.otel.transport`, which retries transient failures within its timeout): the chunks'
bodies joined, which protobuf reads as one ``ExportTraceServiceRequest`` holding every chunk's
``ResourceSpans`` (a message's encodings concatenated are the message merged, its repeated
fields appended). Chunks keep the spans in hand few: building and encoding a whole batch of
500 traces at once cost 46-49 µs per trace against 38-41 µs 32 at a time (the objects of a
whole batch no longer fit the CPU's caches). A batch it could not send is dropped and counted
(``routelens_otel_spans_dropped_total``): the store has every trace, and replaying spans to a
tracing backend hours late helps no one. ``write`` then raises :class:`OtlpExportFailed`, which
the exporter's queue (:class:`ingest.pipeline.export_queue.ExportQueue`) takes as a batch given up
at once: its records count as the pipeline's ``routelens_sink_dropped_records_total{sink="otel"}``,
never as ``routelens_sink_delivered_records_total{sink="otel"}`` (the records whose spans the
receiver took, and those with nothing to send: unsampled, or not traces).

Sampling follows OpenTelemetry's ``ParentBased(TraceIdRatioBased)``: a request in a client's trace
is exported when the client's ``traceparent`` says it sampled the trace (flag ``01``) and not when
it says it did not (``00``); a trace the gateway began is decided on its trace id, as
``TraceIdRatioBased`` decides it (its lower 64 bits below ``ratio * 2**64``), so services sampling
at the same ratio keep the same traces. A request that ended in an error or a fallback is exported
whatever the draw.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from ingest.errors import SinkError
from ingest.kinds import Kind
from ingest.otel.spans import PlainSpan, SpanBuilder, ids_of
from ingest.otel.wire import encode_request, encode_traces
from ingest.record_sink import PreparedBatch, RecordBatch, Rejected, WriteResult
from schemas.sampling import ratio_keeps

__all__ = ["CHUNK", "EncodedSpans", "OtelStats", "OtlpExportFailed", "OtlpSink", "Transport"]

CHUNK = 32  # traces built and encoded together
# What a trace of another shape than the contract's makes the builder raise: the trace is refused, counted
_SHAPE_ERRORS = (AttributeError, KeyError, TypeError, ValueError)


class OtlpExportFailed(SinkError):
    """The receiver did not take a batch's spans (refused, unreachable, too slow): they are dropped, counted.

    Not :class:`~ingest.errors.SinkUnavailable`: the transport already retried what the OTLP
    specification lets it retry, so the exporter's queue gives the batch up at once.
    """


class EncodedSpans(NamedTuple):
    """One chunk's spans, encoded: an ``ExportTraceServiceRequest`` body and how many spans it holds."""

    body: bytes
    spans: int


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


def wanted(trace: dict[str, Any], ratio: float) -> bool:
    """Errors and fallbacks always; a request in a client's trace as the client sampled it; the rest by the ratio.

    The client's choice is its ``traceparent``'s sampled flag, as OpenTelemetry's ``ParentBased``
    sampler takes it: a client that records its trace gets the gateway's spans in it, one that
    does not gets no spans hanging from a parent its backend never receives.
    """
    if trace["outcome"]["status"] != "ok" or trace["fallback_triggered"]:
        return True
    flags = trace.get("otel_trace_flags")
    if flags is not None and trace.get("otel_parent_span_id") is not None:
        return int(flags, 16) & 1 == 1
    return ratio_keeps(ids_of(trace)[0], ratio)


def _no_spans(payload: bytes, exc: Exception) -> Rejected:
    return Rejected(Kind.TRACE, payload, f"no spans: {type(exc).__name__}: {exc}")


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
        """Sample the batch's traces, build their spans and encode them (other kinds of records are ignored)."""
        out = PreparedBatch(batch)
        encoded: list[EncodedSpans] = []
        chunk: list[tuple[bytes, dict[str, Any]]] = []
        for payload in (*batch.payloads.get(Kind.TRACE, ()), *batch.payloads.get(Kind.TRACE_UNCHECKED, ())):
            try:
                trace = orjson.loads(payload)
                if not wanted(trace, self.sample_ratio):
                    self.stats.traces_unsampled += 1
                    continue
            except (orjson.JSONDecodeError, *_SHAPE_ERRORS) as exc:
                out.rejected.append(_no_spans(payload, exc))
                continue
            chunk.append((payload, trace))
            if len(chunk) == CHUNK:
                encoded += self._chunk(chunk, out.rejected)
                chunk = []
        if chunk:
            encoded += self._chunk(chunk, out.rejected)
        out.tables[Kind.TRACE] = encoded
        return out

    def _chunk(self, chunk: list[tuple[bytes, dict[str, Any]]], rejected: list[Rejected]) -> list[EncodedSpans]:
        """A chunk's spans, encoded (the builder's and the encoder's work in one C call where it is built)."""
        if encode_traces is not None:
            body, n, refused, dropped = encode_traces(self.resource, self.scope, [t for _, t in chunk], self.builder)
            rejected += (_no_spans(chunk[i][0], exc) for i, exc in refused)
            self.stats.traces_sampled += len(chunk) - len(refused)
            self.stats.dropped += dropped
            return [EncodedSpans(body, n)]
        spans: list[PlainSpan] = []
        for payload, trace in chunk:
            try:
                spans += self.builder.spans(trace)
            except _SHAPE_ERRORS as exc:
                rejected.append(_no_spans(payload, exc))
                continue
            self.stats.traces_sampled += 1
        return [self._encode(spans)] if spans else []

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Export the batch's spans in one request.

        Raises:
            OtlpExportFailed: The receiver did not take them: they are dropped and counted
                (``dropped``, ``failed_exports``), and the batch's records are not delivered.
        """
        encoded: list[EncodedSpans] = prepared.tables.get(Kind.TRACE) or []
        result = WriteResult(rejected=list(prepared.rejected))
        n = sum(chunk.spans for chunk in encoded)
        if not n:
            return result
        problem = "refused or unreachable"  # the transport logged which, with the endpoint
        try:
            ok = self.transport.send(b"".join(chunk.body for chunk in encoded if chunk.spans))
        except Exception as exc:  # noqa: BLE001  (any fault of the transport is a failed export)
            problem, ok = f"{type(exc).__name__}: {exc}", False
        if not ok:
            self.stats.failed_exports += 1
            self.stats.dropped += n
            raise OtlpExportFailed(f"the OTLP receiver did not take {n} spans ({problem}); "
                                   f"{self.stats.dropped} spans dropped so far")
        self.stats.exported += n
        return result

    def _encode(self, spans: list[PlainSpan]) -> EncodedSpans:
        """The spans' request body: one whose values cannot be encoded is left out, counted."""
        try:
            return EncodedSpans(encode_request(self.resource, self.scope, spans), len(spans))
        except (TypeError, ValueError, OverflowError):
            kept = [span for span in spans if _encodes(span)]
            self.stats.dropped += len(spans) - len(kept)
            return EncodedSpans(encode_request(self.resource, self.scope, kept), len(kept))

    def idle(self) -> None:
        """Nothing is deferred."""

    def close(self) -> None:
        """Close the transport."""
        self.transport.close()
