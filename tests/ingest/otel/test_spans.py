"""A decision trace as spans: the tree, the ids recorded and sent upstream, attributes, events, sampling."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, set_span_in_context
from prometheus_client import CollectorRegistry, generate_latest

from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from ingest.otel import OtelCollector, OtlpSink, PlainSpan, SpanBuilder
from ingest.otel.sink import CHUNK, OtlpExportFailed, wanted
from ingest.record_sink import RecordBatch
from schemas import Attempt, AttemptStatus, DecisionTrace, Outcome, OutcomeStatus
from schemas.sampling import ratio_keeps
from tests.factories import make_trace

QUERY = "合同第3条的违约责任是什么？"  # make_trace's query: only its hash may appear
TRACE_ID, REQUEST_SPAN, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331", "00f067aa0ba902b7"
ATTEMPT_SPANS = ("1111111111111111", "2222222222222222")


def traced(request_id: str = "req-otel-1", **overrides: Any) -> DecisionTrace:
    """make_trace with trace context and a failed attempt before the one that served."""
    attempts = [Attempt(seq=0, instance="v4-c", model="deepseek-v4-32k", status=AttemptStatus.HTTP_ERROR,
                        http_status=503, error_class="HTTP 503", latency_ms=12.0, span_id=ATTEMPT_SPANS[0]),
                Attempt(seq=1, instance="v4-b", model="deepseek-v4-32k", status=AttemptStatus.OK,
                        http_status=200, latency_ms=41.5, span_id=ATTEMPT_SPANS[1])]
    fields: dict[str, Any] = {"otel_trace_id": TRACE_ID, "otel_span_id": REQUEST_SPAN, "otel_parent_span_id": PARENT,
                              "attempts": attempts, "fallback_triggered": True,
                              "fallback_reason": "attempt on v4-c failed: HTTP 503", "intent": "legal",
                              "experiment_arm": "b"}
    return make_trace(request_id, **(fields | overrides))


def stored(*traces: DecisionTrace) -> RecordBatch:
    """The batch an exporter receives: the traces in their stored form, as the encoder writes them."""
    batch = RecordBatch()
    enc = Encoder(1.0)
    for trace in traces:
        for kind, payload in enc.encode(trace):
            batch.add(kind, payload)
    return batch


class Memory:
    """A transport that keeps each body (or refuses them all)."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.bodies: list[bytes] = []
        self.refuse = refuse

    def send(self, body: bytes) -> bool:
        self.bodies.append(body)
        return not self.refuse

    def close(self) -> None:
        pass


def export(*traces: DecisionTrace, ratio: float = 1.0, public_url: str | None = None,
           ) -> tuple[list[PlainSpan], OtlpSink]:
    """The spans of ``traces`` as the sink's builder builds them; checks they are what it sent, in order."""
    memory = Memory()
    builder = SpanBuilder(public_url)
    sink = OtlpSink(memory, builder, {"service.name": "rl-test"}, sample_ratio=ratio)
    batch = stored(*traces)
    result = sink.write(sink.prepare(batch))
    assert result.rejected == []
    built = [orjson.loads(p) for p in batch.payloads[Kind.TRACE]]
    spans = [s for t in built if wanted(t, ratio) for s in builder.spans(t)]
    assert [s.span_id.hex() for s in sent_spans(memory)] == [s.span_id for s in spans]
    assert sink.stats.exported == len(spans)
    return spans, sink


def sent_spans(memory: Memory) -> list[Any]:
    """Every span of every body sent, in order (a body holds one ``ResourceSpans`` per chunk of traces)."""
    return [s for b in memory.bodies for r in ExportTraceServiceRequest.FromString(b).resource_spans
            for scope in r.scope_spans for s in scope.spans]


def test_the_span_tree_carries_the_recorded_ids() -> None:
    spans, sink = export(traced())
    request, decision, *attempts = spans
    assert {s.trace_id for s in spans} == {TRACE_ID}
    assert request.span_id == REQUEST_SPAN and request.parent_id == PARENT and request.parent_remote
    assert request.kind is SpanKind.SERVER and decision.kind is SpanKind.INTERNAL
    assert decision.parent_id == REQUEST_SPAN and not decision.parent_remote
    assert [a.span_id for a in attempts] == list(ATTEMPT_SPANS)  # what went upstream
    assert all(a.parent_id == REQUEST_SPAN for a in attempts)
    assert [a.kind for a in attempts] == [SpanKind.CLIENT] * 2
    assert [a.error for a in attempts] == ["HTTP 503", None]
    assert sink.stats.exported == 4 and sink.stats.traces_sampled == 1
    # no start recorded (an older trace): the attempts follow the decision, one after the other
    assert attempts[0].start_ns == decision.end_ns and attempts[1].start_ns == attempts[0].end_ns


def test_attempt_spans_start_when_the_attempts_were_sent_so_a_hedge_overlaps_its_race() -> None:
    first = Attempt(seq=0, instance="v4-c", model="deepseek-v4-32k", status=AttemptStatus.TIMEOUT,
                    error_class="hedged_out", latency_ms=300.0, span_id=ATTEMPT_SPANS[0], start_ms=2.5)
    twin = Attempt(seq=1, instance="v4-b", model="deepseek-v4-32k", status=AttemptStatus.OK, http_status=200,
                   latency_ms=41.5, span_id=ATTEMPT_SPANS[1], start_ms=252.5)  # sent 250 ms into the first
    (request, _, a, b), _ = export(traced(attempts=[first, twin]))
    assert (a.start_ns - request.start_ns, a.end_ns - request.start_ns) == (2_500_000, 302_500_000)
    assert (b.start_ns - request.start_ns, b.end_ns - request.start_ns) == (252_500_000, 294_000_000)
    assert b.start_ns < a.end_ns  # the twin raced the first attempt


def test_request_and_decision_attributes() -> None:
    spans, _ = export(traced(), public_url="https://rl.example.com/")
    request, decision, failed, served = spans
    assert request.name == "chat auto"
    r = request.attributes
    assert r["gen_ai.operation.name"] == "chat" and r["gen_ai.request.model"] == "auto"
    assert r["gen_ai.response.model"] == "deepseek-v4-32k"
    assert (r["gen_ai.usage.input_tokens"], r["gen_ai.usage.output_tokens"]) == (14, 20)
    assert r["routelens.trace_url"] == "https://rl.example.com/trace?request_id=req-otel-1"
    d = decision.attributes
    assert d["openinference.span.kind"] == "DECISION"
    assert (d["routelens.rule"], d["routelens.intent"], d["routelens.arm"]) == ("auto", "legal", "b")
    assert d["routelens.router_version"] == "routelens-test" and d["routelens.policy_hash"].startswith("sha256:")
    assert (d["routelens.selected_instance"], d["routelens.selected_model"]) == ("v4-b", "deepseek-v4-32k")
    assert d["routelens.mode"] == "normal" and d["routelens.fallback"] is True
    assert d["routelens.fallback_reason"] == "attempt on v4-c failed: HTTP 503"
    assert d["routelens.trace_url"] == r["routelens.trace_url"]
    assert "routelens.margin" not in d  # one ranked candidate: no runner-up
    assert failed.attributes["http.response.status_code"] == 503
    assert served.attributes["routelens.attempt.status"] == "ok"


def test_an_event_per_step_and_per_eliminated_candidate() -> None:
    _, decision, *_ = export(traced())[0]
    names = [e.name for e in decision.events]
    assert names == ["filter/kv-cache", "pick", "eliminated"]  # analyse is not an event
    filt = decision.events[0].attributes
    assert filt["routelens.step.kind"] == "filter" and list(filt["routelens.step.rejected"]) == ["v4-a"]
    out = decision.events[2].attributes
    assert out["routelens.candidate.instance"] == "v4-a" and out["routelens.constraint"] == "kv-cache"
    assert (out["routelens.metric"], out["routelens.value"], out["routelens.threshold"]) == \
        ("kv_cache_usage", 0.93, 0.85)
    assert out["routelens.reason"] == "kv_cache_usage 0.93 breaks <= 0.85"


def test_margin_is_the_winner_over_the_runner_up() -> None:
    base = make_trace()
    second = base.candidates[1].model_copy(update={"instance": "v4-z", "total": 0.2, "rank": 2})
    _, decision, *_ = export(traced(candidates=[*base.candidates, second]))[0]
    assert abs(decision.attributes["routelens.margin"] - 0.12) < 1e-9


def test_no_span_carries_the_query_text() -> None:
    spans, _ = export(traced())
    text = repr(spans)
    assert QUERY not in text and "合同" not in text
    assert traced().query_hash in text


def test_a_trace_without_context_gets_ids_derived_from_its_request_id() -> None:
    plain = make_trace("req-intake-7")
    first, _ = export(plain)
    again, _ = export(plain)
    assert [(s.trace_id, s.span_id) for s in first] == [(s.trace_id, s.span_id) for s in again]
    assert first[0].parent_id is None and len({s.span_id for s in first}) == 3


def test_sampling_keeps_what_the_sdk_ratio_sampler_keeps() -> None:
    rng = random.Random(5)
    for ratio in (0.0, 0.1, 0.5, 0.9):
        sampler = TraceIdRatioBased(ratio)
        for _ in range(300):
            trace_id = rng.getrandbits(128) or 1
            expected = sampler.should_sample(None, trace_id, "x").decision.is_sampled()
            assert ratio_keeps(format(trace_id, "032x"), ratio) is expected


def test_a_client_trace_is_exported_as_the_client_sampled_it_as_the_sdk_parent_based_sampler_decides() -> None:
    rng = random.Random(7)
    for ratio in (0.0, 0.3, 1.0):
        sampler = ParentBased(TraceIdRatioBased(ratio))
        for i in range(120):
            trace_id, flags = rng.getrandbits(128) or 1, rng.choice(("00", "01"))
            parent = None if i % 3 == 0 else PARENT  # a third begun here, the rest in a client's trace
            ctx = None if parent is None else set_span_in_context(NonRecordingSpan(SpanContext(
                trace_id, int(parent, 16), is_remote=True, trace_flags=TraceFlags(int(flags, 16)))))
            expected = sampler.should_sample(ctx, trace_id, "x").decision.is_sampled()
            trace = make_trace(f"req-{i}", otel_trace_id=format(trace_id, "032x"), otel_span_id=REQUEST_SPAN,
                               otel_parent_span_id=parent, otel_trace_flags=flags)
            as_stored = orjson.loads(stored(trace).payloads[Kind.TRACE][0])
            assert wanted(as_stored, ratio) is expected, (ratio, flags, parent)


def test_an_unsampled_client_trace_is_still_exported_on_an_error_or_a_fallback() -> None:
    failed = traced("req-err", otel_trace_flags="00", fallback_triggered=False, fallback_reason=None,
                    outcome=Outcome(status=OutcomeStatus.ERROR, http_status=503, total_ms=5.0))
    quiet = traced("req-quiet", otel_trace_flags="00", fallback_triggered=False, fallback_reason=None)
    spans, sink = export(failed, quiet, traced("req-fb", otel_trace_flags="00"), ratio=1.0)
    assert {s.attributes["routelens.request_id"] for s in spans if s.kind is SpanKind.SERVER} == {"req-err", "req-fb"}
    assert sink.stats.traces_unsampled == 1


def test_errors_and_fallbacks_are_exported_whatever_the_ratio() -> None:
    ok = make_trace("req-ok", otel_trace_id="f" * 32)
    failed = make_trace("req-err", outcome=Outcome(status=OutcomeStatus.ERROR, http_status=503, total_ms=5.0,
                                                   error_class="AttemptsExhausted"))
    fell_back = traced("req-fb")
    spans, sink = export(ok, failed, fell_back, ratio=0.0)
    exported = {s.attributes["routelens.request_id"] for s in spans if s.kind is SpanKind.SERVER}
    assert exported == {"req-err", "req-fb"}
    assert (sink.stats.traces_sampled, sink.stats.traces_unsampled) == (2, 1)
    error_span = next(s for s in spans if s.attributes.get("routelens.request_id") == "req-err")
    assert error_span.error == "AttemptsExhausted"


def test_a_failed_export_is_dropped_and_counted() -> None:
    sink = OtlpSink(Memory(refuse=True), SpanBuilder(), {})
    with pytest.raises(OtlpExportFailed, match="did not take 8 spans"):  # its records are not delivered
        sink.write(sink.prepare(stored(traced("r1"), traced("r2"))))
    assert (sink.stats.exported, sink.stats.dropped, sink.stats.failed_exports) == (0, 8, 1)
    registry = CollectorRegistry()
    registry.register(OtelCollector(sink.stats))
    text = generate_latest(registry).decode()
    assert "routelens_otel_spans_dropped_total 8.0" in text and "routelens_otel_spans_exported_total 0.0" in text


def test_unchecked_traces_are_exported_and_what_cannot_be_built_or_encoded_is_left_out_counted() -> None:
    # The gateway's own traces reach the exporter unvalidated (the store validates them): the sink
    # builds spans from what it can read and leaves out, counted, what it cannot.
    good, broken, odd = (orjson.loads(stored(traced(rid)).payloads[Kind.TRACE][0]) for rid in ("r1", "r2", "r3"))
    del broken["outcome"]  # no span tree without an outcome
    odd["selected_model"] = {"not": "a string"}  # an attribute value OTLP has no type for
    batch = RecordBatch()
    for trace in (good, broken, odd):
        batch.add(Kind.TRACE_UNCHECKED, orjson.dumps(trace))
    memory = Memory()
    sink = OtlpSink(memory, SpanBuilder(), {})
    prepared = sink.prepare(batch)
    result = sink.write(prepared)
    assert [r.reason.split(":")[0] for r in result.rejected] == ["no spans"]
    sent = sent_spans(memory)
    by_request = {a.value.string_value for s in sent for a in s.attributes if a.key == "routelens.request_id"}
    assert by_request == {"r1"}  # r3's request and decision spans carry the bad value; its two attempts go
    assert (len(sent), sink.stats.exported, sink.stats.dropped) == (6, 6, 2)


def test_a_batch_larger_than_a_chunk_goes_in_one_request_of_one_resource_spans_per_chunk() -> None:
    traces = [traced(f"r{i}") for i in range(CHUNK * 2 + 5)]
    spans, sink = export(*traces)  # every span sent, in order
    assert len(spans) == 4 * len(traces)
    memory = sink.transport
    assert isinstance(memory, Memory) and len(memory.bodies) == 1
    request = ExportTraceServiceRequest.FromString(memory.bodies[0])
    assert len(request.resource_spans) == 3  # 32 + 32 + 5 traces
    assert {a.value.string_value for r in request.resource_spans for a in r.resource.attributes} == {"rl-test"}
