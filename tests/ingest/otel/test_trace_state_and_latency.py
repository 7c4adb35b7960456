"""The exported spans carry the client's ``tracestate`` and each attempt's upstream latency as an attribute.

The gateway passes a client's ``tracestate`` upstream with each attempt's ``traceparent``; the spans
it exported for the request had no ``trace_state``, so a backend that reads vendor state off the
spans (sampling decisions, tenant keys) saw none. A trace carries it as ``otel_trace_state``; every
span of its tree gets it. And an attempt span gave its latency only as its length:
``routelens.attempt.latency_ms`` now says it as a number to filter and aggregate on, as the
decision span's ``routelens.decision_ms`` does. Both the C path and the Python builder, held equal;
the body read as a loopback OTLP/HTTP receiver gets it, decoded with the OTLP protobuf classes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from bench.gateway_otel import OtlpReceiver
from ingest.kinds import Kind
from ingest.otel import OtlpHttp, OtlpSink, SpanBuilder, encode_request, to_readable, wire
from ingest.otel import sink as sink_module
from ingest.record_sink import RecordBatch
from tests.ingest.otel.test_spans import ATTEMPT_SPANS, stored, traced
from tests.ingest.otel.test_traces_fast import fast, reference, stored_traces

STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    rec = OtlpReceiver(keep=True)
    yield rec
    rec.close()


def gateway_trace(request_id: str, state: str | None) -> dict[str, Any]:
    """A trace as the gateway's pipeline hands it to the exporter, with the client's tracestate when given."""
    (payload,) = stored(traced(request_id)).payloads[Kind.TRACE]
    trace: dict[str, Any] = orjson.loads(payload)
    if state is not None:
        trace["otel_trace_state"] = state
    return trace


def received_spans(receiver: OtlpReceiver, *traces: dict[str, Any]) -> list[Any]:
    """The spans of ``traces`` as the real transport posts them to ``receiver``, decoded."""
    batch = RecordBatch()
    for trace in traces:
        batch.add(Kind.TRACE_UNCHECKED, orjson.dumps(trace))
    sink = OtlpSink(OtlpHttp(receiver.url + "/v1/traces", timeout_s=10), SpanBuilder(), {"service.name": "rl-test"})
    result = sink.write(sink.prepare(batch))
    sink.close()
    assert result.rejected == [] and sink.stats.dropped == 0
    (_, _, body), = receiver.received
    return [s for r in ExportTraceServiceRequest.FromString(body).resource_spans for scope in r.scope_spans
            for s in scope.spans]


@pytest.mark.parametrize("path", ["c", "python"])
def test_every_span_of_a_request_with_a_tracestate_carries_it(receiver: OtlpReceiver, path: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "python":
        monkeypatch.setattr(sink_module, "encode_traces", None)
    else:
        assert wire.encode_traces is not None, "the C extension is not built (make builds it)"
    spans = received_spans(receiver, gateway_trace("r-state", STATE), gateway_trace("r-none", None))
    assert len(spans) == 8  # request, decision and two attempts, each
    with_state = [s for s in spans if s.trace_state]
    assert len(with_state) == 4 and {s.trace_state for s in with_state} == {STATE}
    assert {s.span_id.hex() for s in with_state} >= set(ATTEMPT_SPANS)  # the attempts sent it upstream too
    assert {a.value.string_value for s in with_state for a in s.attributes
            if a.key == "routelens.request_id"} == {"r-state"}


@pytest.mark.parametrize("path", ["c", "python"])
def test_an_attempt_span_carries_its_upstream_latency_in_ms(receiver: OtlpReceiver, path: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "python":
        monkeypatch.setattr(sink_module, "encode_traces", None)
    spans = received_spans(receiver, gateway_trace("r-lat", None))
    attempts = [s for s in spans if s.name.startswith("routelens.attempt ")]
    latency = [next(a.value.double_value for a in s.attributes if a.key == "routelens.attempt.latency_ms")
               for s in attempts]
    assert latency == [12.0, 41.5]  # traced(): the failed attempt's, then the one that served
    assert [(s.end_time_unix_nano - s.start_time_unix_nano) / 1e6 for s in attempts] == latency
    assert all(not any(a.key == "routelens.attempt.latency_ms" for a in s.attributes)
               for s in spans if not s.name.startswith("routelens.attempt "))


def test_the_tracestate_encodes_as_the_sdk_encodes_a_spans_context() -> None:
    spans = SpanBuilder().spans(gateway_trace("r-sdk", STATE))
    resource = {"service.name": "routelens"}
    ours = ExportTraceServiceRequest.FromString(encode_request(resource, ("routelens", None), spans))
    assert ours == encode_spans([to_readable(s, Resource(resource), InstrumentationScope("routelens")) for s in spans])
    assert encode_request(resource, ("routelens", None), spans) == wire.encode_request_py(resource, ("routelens", None),
                                                                                          spans)


@pytest.mark.parametrize("state", [STATE, "", None, 5, ["k=v"], " k=v , other=1 "])
def test_the_c_path_writes_the_tracestate_as_the_python_builder_and_encoder_do(state: Any) -> None:
    traces = stored_traces(4, seed=3)
    for trace in traces[1:3]:
        trace["otel_trace_state"] = state
    mixed = [*traces, copy.deepcopy(traces[0])]
    expected = reference(mixed, SpanBuilder())
    assert fast(mixed, SpanBuilder()) == expected
    if isinstance(state, str) and state:  # written as received
        assert expected[3] == 0 and state.encode() in expected[0]
    elif state in ("", None):  # none: the bytes of the traces without it
        plain = stored_traces(4, seed=3)
        assert expected[0] == reference([*plain, copy.deepcopy(plain[0])], SpanBuilder())[0]
    else:  # a value of another type: those traces' spans are left out, counted
        assert expected[3] == sum(len(SpanBuilder().spans(t)) for t in traces[1:3])
