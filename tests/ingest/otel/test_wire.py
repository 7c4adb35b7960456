"""Our OTLP body is the SDK encoder's, message for message, for the same spans; the C encoder's is the Python one's.

``encode_request`` is the C extension's (``ingest.otel._otlp_wire``) where it is built, as it is by
``make``; ``encode_request_py`` is the Python reference. Each is held to the SDK, and the two to
each other byte for byte, errors included.
"""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from ingest.otel import PlainSpan, SpanBuilder, encode_request, to_readable, wire
from ingest.otel.spans import PlainEvent
from tests.ingest.otel.test_spans import traced

RESOURCE = {"service.name": "routelens", "service.version": "0.1.0", "telemetry.sdk.language": "python"}


def sdk_body(spans: list[PlainSpan], version: str | None = None) -> ExportTraceServiceRequest:
    scope = InstrumentationScope("routelens", version)
    return encode_spans([to_readable(s, Resource(RESOURCE), scope) for s in spans])


def ours(spans: list[PlainSpan], version: str | None = None) -> ExportTraceServiceRequest:
    body = encode_request(RESOURCE, ("routelens", version), spans)
    assert body == wire.encode_request_py(RESOURCE, ("routelens", version), spans)  # C and Python: the same bytes
    return ExportTraceServiceRequest.FromString(body)


def test_the_c_encoder_is_built() -> None:
    """``make`` builds it; without it the exporter's thread spends ten times the CPU encoding (same bytes)."""
    assert wire.FAST


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


def test_lengths_past_one_byte_and_deep_arrays_encode_as_the_sdk_encodes_them() -> None:
    long = "x" * 200  # a field's length takes two bytes: the C encoder moves the field's body up
    attrs = {long: long * 100, "nested": [[1, [2, 3]], ["a"]], "many": list(range(300))}
    events = [PlainEvent(f"e{i}", i, {"i": i, "s": long}) for i in range(40)]
    span = PlainSpan("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, False, long, SpanKind.SERVER,
                     1, 2, attrs, events, long)
    flat = PlainSpan(*span[:8], {long: long * 100, "many": list(range(300))}, events, long)
    assert ours([flat] * 50) == sdk_body([flat] * 50)  # the SDK has no nested arrays
    body = encode_request(RESOURCE, ("routelens", "9" * 300), [span] * 3)
    assert body == wire.encode_request_py(RESOURCE, ("routelens", "9" * 300), [span] * 3)


BAD = {
    "a value of another type": ({"k": {"a": 1}}, TypeError),
    "an int past int64": ({"k": 2**63}, OverflowError),
    "an int below int64": ({"k": -(2**63) - 1}, OverflowError),
    "a lone surrogate": ({"k": "\ud800"}, UnicodeEncodeError),
    "a key that is not a str": ({1: "v"}, (TypeError, AttributeError)),
}


@pytest.mark.parametrize("case", list(BAD))
def test_what_cannot_be_encoded_raises_in_both_encoders(case: str) -> None:
    attrs, error = BAD[case]
    span = PlainSpan("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", None, False, "n", SpanKind.CLIENT,
                     1, 2, attrs, [], None)
    for encode in (encode_request, wire.encode_request_py):
        with pytest.raises(error):
            encode(RESOURCE, ("routelens", None), [span])


@pytest.mark.parametrize("ids", [("0af7", "b7ad6b7169203331"),
                                 ("0af7651916cd43dd8448eb211c80319c", "b7ad6b716920333z")])
def test_an_id_that_is_not_hex_of_its_length_raises_in_both_encoders(ids: tuple[str, str]) -> None:
    span = PlainSpan(ids[0], ids[1], None, False, "n", SpanKind.CLIENT, 1, 2, {}, [], None)
    for encode in (encode_request, wire.encode_request_py):
        with pytest.raises(ValueError):
            encode(RESOURCE, ("routelens", None), [span])
