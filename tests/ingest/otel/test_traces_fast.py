"""The C path from stored traces to OTLP bytes (``encode_traces``) writes what the Python builder and encoder write.

``SpanBuilder.spans`` then ``encode_request_py`` is the reference: for every trace, well-formed or
not, ``encode_traces`` gives the same bytes, the same rejected traces and the same dropped spans.
A well-formed trace never reaches the Python builder (that is the point of the C path); any other
shape is handed to it, and what it does is what is exported.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from ingest.otel import OtlpSink, PlainSpan, SpanBuilder, wire
from ingest.otel import sink as sink_module
from ingest.otel.wire import encode_request_py
from ingest.record_sink import RecordBatch
from tests.ingest.otel.test_spans import Memory, traced

RESOURCE = {"service.name": "routelens", "service.version": "0.1.0"}
SCOPE = ("routelens", "0.1.0")


class Counting(SpanBuilder):
    """A SpanBuilder that counts the traces it builds in Python."""

    built = 0

    def spans(self, trace: Any) -> list[PlainSpan]:
        self.built += 1
        return super().spans(trace)


def reference(traces: list[Any], builder: SpanBuilder) -> tuple[bytes, int, list[int], int]:
    """What the Python path exports: (body, spans, indexes of the traces refused, spans dropped)."""
    kept: list[PlainSpan] = []
    refused, dropped = [], 0
    for i, trace in enumerate(traces):
        try:
            spans = builder.spans(trace)
        except (AttributeError, KeyError, TypeError, ValueError):
            refused.append(i)
            continue
        for span in spans:
            try:
                encode_request_py({}, ("", None), [span])
            except (TypeError, ValueError, OverflowError):
                dropped += 1
                continue
            kept.append(span)
    return encode_request_py(RESOURCE, SCOPE, kept), len(kept), refused, dropped


def fast(traces: list[Any], builder: SpanBuilder) -> tuple[bytes, int, list[int], int]:
    assert wire.encode_traces is not None, "the C extension is not built (make builds it)"
    body, n, refused, dropped = wire.encode_traces(RESOURCE, SCOPE, traces, builder)
    assert all(isinstance(exc, AttributeError | KeyError | TypeError | ValueError) for _, exc in refused)
    return body, n, [i for i, _ in refused], dropped


def stored_traces(n: int, seed: int) -> list[dict[str, Any]]:
    """Traces as the exporter gets them: a gateway's (trace context, attempt span ids) and synthetic ones."""
    enc, out = Encoder(1.0), []
    for trace in [traced("req-fast-1"), traced("req-fast-2", otel_parent_span_id=None),
                  *TraceFactory(seed=seed, n_candidates=4, round_every=5).traces(n)]:
        out += [orjson.loads(p) for kind, p in enc.encode(trace) if kind is Kind.TRACE]
    return out


@pytest.mark.parametrize("public_url", [None, "https://rl.example.com/app/"])
@pytest.mark.parametrize("seed", [1, 7])
def test_well_formed_traces_are_written_in_c_as_the_builder_and_encoder_write_them(seed: int,
                                                                                    public_url: str | None) -> None:
    traces = stored_traces(80, seed)
    builder = Counting(public_url)
    expected = reference(traces, SpanBuilder(public_url))
    assert expected[1] > 3 * len(traces) - 1 and not expected[2] and not expected[3]
    assert fast(traces, builder) == expected
    assert builder.built == 0  # none of them took the Python builder


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change of one field (``a.b.0.c``: keys and list indexes); ``value`` DELETE removes it."""
    *head, last = path.split(".")

    def change(trace: dict[str, Any]) -> None:
        node: Any = trace
        for part in head:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if value is DELETE:
            del node[key]
        else:
            node[key] = value
    return change


DELETE = object()
ODD: dict[str, Callable[[dict[str, Any]], None]] = {
    # shapes the C path declines and the builder exports
    "int latency": _set("latency_ms", 3),
    "bool latency": _set("latency_ms", True),
    "int total": _set("candidates.0.total", 1),
    "equal totals": lambda t: [c.update(total=0.5) for c in t["candidates"] if c.get("rank") is not None],
    "zero and minus zero": lambda t: [c.update(total=-0.0 if i else 0.0) for i, c in enumerate(t["candidates"])],
    "nan total": _set("candidates.0.total", math.nan),
    "no attempt span id": _set("attempts.0.span_id", None),
    "empty attempt span id": _set("attempts.0.span_id", ""),
    "step value true": lambda t: [s.update(value=True) for s in t["decision_trace"]],
    "step value list": lambda t: [s.update(value=[1]) for s in t["decision_trace"]],
    "step instances str": lambda t: [s.update(instances="abc") for s in t["decision_trace"]],
    "int duration": lambda t: [s.update(duration_us=3) for s in t["decision_trace"]],
    "severity none": lambda t: [v.update(severity=None) for c in t["candidates"] for v in c.get("violations") or ()],
    "severity int": lambda t: [v.update(severity=5) for c in t["candidates"] for v in c.get("violations") or ()],
    "model not str": _set("features.requested_model", 7),
    "extra field": _set("unknown", {"x": 1}),
    "no max tokens": _set("features.max_tokens", DELETE),
    "huge latency": _set("latency_ms", 1e300),
    "int seq": _set("attempts.0.seq", 2**70),
    "no client span": _set("otel_parent_span_id", None),
    "empty error class": _set("outcome.error_class", ""),
    # values the encoder refuses: their spans are dropped
    "dict attribute": _set("intent", {"a": 1}),
    "bad parent id": _set("otel_parent_span_id", "xyz"),
    "error class int": lambda t: t["outcome"].update(status="error", error_class=5),
    "negative duration": lambda t: [s.update(duration_us=-1e15) for s in t["decision_trace"]],
    # what the builder cannot build: the trace is refused
    "no outcome": _set("outcome", DELETE),
    "no router version": _set("router_version", DELETE),
    "candidates not a list": _set("candidates", 5),
    "latency str": _set("latency_ms", "5"),
    "bad ts": _set("ts", "yesterday"),
    "violation not a dict": lambda t: t["candidates"].append({"instance": "x", "model": "m", "feasible": False,
                                                               "violations": [5]}),
}


@pytest.mark.parametrize("case", sorted(ODD))
def test_any_other_shape_is_exported_as_the_python_builder_exports_it(case: str) -> None:
    traces = stored_traces(3, seed=5)
    for trace in traces:
        ODD[case](trace)
    mixed = [*copy.deepcopy(stored_traces(2, seed=6)), *traces]  # well-formed ones around them keep their place
    mixed.insert(3, copy.deepcopy(mixed[0]))
    assert fast(mixed, Counting("https://rl.example.com")) == reference(mixed, SpanBuilder("https://rl.example.com"))


def test_what_the_builder_raises_besides_its_own_errors_is_raised() -> None:
    class Broken(SpanBuilder):
        def spans(self, trace: Any) -> list[PlainSpan]:
            raise RuntimeError("a bug")

    trace = stored_traces(1, seed=2)[0]
    trace["latency_ms"] = True  # declined: Broken.spans runs
    with pytest.raises(RuntimeError, match="a bug"):
        fast([trace], Broken())


def test_the_sink_exports_the_same_spans_with_the_c_path_and_without_it(monkeypatch: pytest.MonkeyPatch) -> None:
    traces = stored_traces(70, seed=9)  # more than two chunks
    ODD["int latency"](traces[5])
    ODD["no outcome"](traces[40])  # refused
    ODD["dict attribute"](traces[41])  # its decision span dropped

    def export() -> tuple[list[bytes], list[str], tuple[int, int, int]]:
        memory, batch = Memory(), RecordBatch()
        for trace in traces:
            batch.add(Kind.TRACE_UNCHECKED, orjson.dumps(trace))
        sink = OtlpSink(memory, SpanBuilder(), {"service.name": "rl-test"})
        result = sink.write(sink.prepare(batch))
        (body,) = memory.bodies
        spans = [s.SerializeToString() for rs in ExportTraceServiceRequest.FromString(body).resource_spans
                 for ss in rs.scope_spans for s in ss.spans]
        return spans, [r.reason for r in result.rejected], (sink.stats.traces_sampled, sink.stats.exported,
                                                           sink.stats.dropped)

    with_c = export()
    monkeypatch.setattr(sink_module, "encode_traces", None)
    assert export() == with_c
    spans, reasons, (sampled, exported, dropped) = with_c
    assert len(reasons) == 1 and reasons[0].startswith("no spans: KeyError")
    assert (sampled, exported, dropped) == (len(traces) - 1, len(spans), 1)
