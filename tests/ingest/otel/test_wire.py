"""Our OTLP body is the SDK encoder's, message for message, for the same spans."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from ingest.otel import PlainSpan, SpanBuilder, encode_request, to_readable
from ingest.otel.spans import PlainEvent
from tests.ingest.otel.test_spans import traced

RESOURCE = {"service.name": "routelens", "service.version": "0.1.0", "telemetry.sdk.language": "python"}


def sdk_body(spans: list[PlainSpan], version: str | None = None) -> ExportTraceServiceRequest:
    scope = InstrumentationScope("routelens", version)
    return encode_spans([to_readable(s, Resource(RESOURCE), scope) for s in spans])


def ours(spans: list[PlainSpan], version: str | None = None) -> ExportTraceServiceRequest:
    return ExportTraceServiceRequest.FromString(encode_request(RESOURCE, ("routelens", version), spans))


def spans_of(n: int, factory: TraceFactory) -> list[PlainSpan]:
    import orjson

    enc, builder, out = Encoder(1.0), SpanBuilder("https://rl.example.com"), []
    for trace in [traced("req-wire"), *factory.traces(n)]:
        for kind, payload in enc.encode(trace):
            if kind is Kind.TRACE:
                out += builder.spans(orjson.loads(payload))
    return out


def test_the_span_trees_of_many_traces_encode_as_the_sdk_encodes_them() -> None:
    spans = spans_of(60, TraceFactory(seed=3, n_candidates=4, round_every=5))
    assert any(s.events for s in spans) and any(s.error is not None for s in spans)
    assert ours(spans) == sdk_body(spans)
    assert ours(spans, "1.2") == sdk_body(spans, "1.2")
    again = ours(spans)  # the second time from the key-value cache
    assert again == sdk_body(spans)


def test_every_attribute_type_encodes_as_the_sdk_encodes_it() -> None:
    attrs = {"s": "ünïcode ✓", "empty": "", "t": True, "f": False, "zero": 0, "big": 2**62, "neg": -3,
             "x": 0.1, "negx": -2.5, "ints": [1, 2, 3], "strs": ["a", "b"], "floats": [0.5], "bools": [True, False]}
    span = PlainSpan("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7", True, "n",
                     SpanKind.CLIENT, 1, 2**63, attrs, [PlainEvent("e", 5, {"k": -1}), PlainEvent("e2", 6, {})],
                     "")
    bare = PlainSpan("0af7651916cd43dd8448eb211c80319c", "00000000000000ff", None, False, "", SpanKind.INTERNAL,
                     0, 0, {}, [], None)
    assert ours([span, bare]) == sdk_body([span, bare])
    assert ours([span]) == sdk_body([span])  # from the cache
