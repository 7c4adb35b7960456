"""The decision span says what the rule's throttle did and how long the request queued for a token.

``routelens.throttled`` and ``routelens.throttle.waited_s`` come from the trace's policy step, in the
Python builder and in the C path alike (byte for byte); a trace whose policy did not throttle or
wait, or that has no policy, carries neither.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.kinds import Kind
from ingest.otel import SpanBuilder, keys
from schemas.trace_policy import PolicyStep
from tests.ingest.otel.test_spans import Memory, export, sent_spans, stored, traced
from tests.ingest.otel.test_traces_fast import Counting, fast, reference

THROTTLE_KEYS = (keys.THROTTLED, keys.THROTTLE_WAITED_S)


def policy(throttled: Any = None, waited_s: Any = None) -> PolicyStep:
    return PolicyStep(policy="policies/routing.yaml@sha256:ab12", rule="auto", throttled=throttled, waited_s=waited_s)


def as_stored(*traces: Any) -> list[dict[str, Any]]:
    """The traces as the exporter reads them (the encoder's JSON, parsed)."""
    return [orjson.loads(p) for p in stored(*traces).payloads[Kind.TRACE]]


def decision_attrs(body: bytes) -> list[dict[str, Any]]:
    """Each decision span's attributes in an OTLP body, as (type, value) by key, in their order."""
    out = []
    for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
        for span in (s for ss in rs.scope_spans for s in ss.spans if s.name == keys.DECISION_SPAN):
            out.append({a.key: (a.value.WhichOneof("value"), getattr(a.value, a.value.WhichOneof("value")))
                        for a in span.attributes})
    return out


def test_a_request_that_waited_for_a_token_says_so_on_its_decision_span() -> None:
    spans, _ = export(traced(policy=policy("wait", 0.375)))
    decision = spans[1]
    assert decision.name == keys.DECISION_SPAN
    assert decision.attributes[keys.THROTTLED] == "wait"
    waited = decision.attributes[keys.THROTTLE_WAITED_S]
    assert isinstance(waited, float) and waited == 0.375
    assert all(k not in s.attributes for s in (spans[0], *spans[2:]) for k in THROTTLE_KEYS)  # the decision's only


def test_the_c_path_writes_them_as_the_builder_does_without_handing_the_trace_back() -> None:
    traces = as_stored(traced("r-wait", policy=policy("wait", 1.5)), traced("r-timeout", policy=policy("reject", 2.0)),
                       traced("r-chain", policy=policy("chain")), traced("r-ok", policy=policy()),
                       traced("r-none"))
    builder = Counting("https://rl.example.com")
    body, *rest = fast(traces, builder)
    assert (body, *rest) == reference(traces, SpanBuilder("https://rl.example.com"))
    assert builder.built == 0  # all of them written in C
    got = [{k: a[k] for k in THROTTLE_KEYS if k in a} for a in decision_attrs(body)]
    assert got == [
        {keys.THROTTLED: ("string_value", "wait"), keys.THROTTLE_WAITED_S: ("double_value", 1.5)},
        {keys.THROTTLED: ("string_value", "reject"), keys.THROTTLE_WAITED_S: ("double_value", 2.0)},
        {keys.THROTTLED: ("string_value", "chain")},
        {},
        {},
    ]


def test_the_sink_sends_them() -> None:
    spans, sink = export(traced(policy=policy("wait", 0.25)), traced("r2", policy=None))  # sent in this order
    memory = sink.transport
    assert isinstance(memory, Memory)
    sent = [{a.key: a.value for a in s.attributes} for s in sent_spans(memory)]
    assert [spans[1].name, spans[5].name] == [keys.DECISION_SPAN] * 2
    waited, plain = sent[1], sent[5]
    assert waited[keys.THROTTLED].string_value == "wait" and waited[keys.THROTTLE_WAITED_S].double_value == 0.25
    assert not any(k in plain for k in THROTTLE_KEYS)


@pytest.mark.parametrize("trace_policy", [None, policy()], ids=["no policy", "not throttled"])
def test_a_request_that_did_not_queue_has_neither(trace_policy: PolicyStep | None) -> None:
    (trace,) = as_stored(traced(policy=trace_policy))
    assert not any(k in SpanBuilder().spans(trace)[1].attributes for k in THROTTLE_KEYS)
    body, *_ = fast([trace], Counting())
    assert not any(k in a for a in decision_attrs(body) for k in THROTTLE_KEYS)


ODD_POLICIES: dict[str, Any] = {
    "policy a str": "routing.yaml",  # the builder cannot read it: the trace is refused, in both paths
    "policy a list": [],
    "throttled an int": {"throttled": 3, "waited_s": 0.5},  # encoded as it is, in both paths
    "waited_s an int": {"throttled": "wait", "waited_s": 2},
    "waited_s a bool": {"throttled": "wait", "waited_s": True},
    "waited_s a dict": {"throttled": "wait", "waited_s": {"s": 1}},  # the encoder refuses it: the span dropped
    "throttled a list": {"throttled": ["wait"], "waited_s": None},
    "empty policy": {},
}
DECLINED = {"policy a str", "policy a list", "waited_s a dict"}  # the C path hands these to the builder


@pytest.mark.parametrize("case", sorted(ODD_POLICIES))
def test_a_policy_of_another_shape_is_handed_to_the_builder(case: str) -> None:
    odd, good = as_stored(traced("r-odd"), traced("r-good", policy=policy("wait", 0.5)))
    odd["policy"] = ODD_POLICIES[case]
    traces = [good, odd, dict(good)]
    builder = Counting()
    assert fast(traces, builder) == reference(traces, SpanBuilder())
    assert builder.built == (case in DECLINED)  # the rest are written in C
