from typing import Any, get_args

import orjson
import pytest

from bench.synthetic import TraceFactory
from ingest.codec.encoder import Encoder, content_id, dumps, is_detailed
from ingest.kinds import Kind
from schemas import DecisionTrace, InstanceSnapshot


def test_the_fast_json_carries_the_same_values_as_pydantic(factory: TraceFactory) -> None:
    for trace in factory.traces(30):
        assert DecisionTrace.model_validate_json(dumps(trace)) == trace
        assert orjson.loads(dumps(trace)) == orjson.loads(trace.model_dump_json())


def test_an_encoded_trace_carries_pydantics_values_with_each_state_as_its_snapshot_id(factory: TraceFactory) -> None:
    enc = Encoder()
    for trace in factory.traces(30):
        kind, payload = enc.encode(trace)[-1]
        expected = orjson.loads(trace.model_dump_json())
        for cand, model in zip(expected["candidates"], trace.candidates, strict=True):
            del cand["state"]
            if model.state is None:
                cand["state_id"] = None
                continue
            ageless = model.state.model_copy(update={"age_s": None, "stale": False})  # the decision's own: beside
            cand.update(state_id=content_id(dumps(ageless)), state_age_s=model.state.age_s,
                        state_stale=model.state.stale)
        assert kind is Kind.TRACE and orjson.loads(payload) == {**expected, "detail": True}


def test_the_trace_models_have_no_custom_serializers_and_no_untyped_fields() -> None:
    # The fast path serializes __dict__ (a field_serializer would be silently skipped), and the
    # encoder hands orjson any object's __dict__: only validated, typed values may reach it.
    def walk(model: type) -> None:
        decorators = model.__pydantic_decorators__  # type: ignore[attr-defined]
        assert not decorators.field_serializers and not decorators.model_serializers, model
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            todo = [info.annotation]
            while todo:
                arg = todo.pop()
                assert arg not in (Any, object), f"{model.__name__}.{name} is untyped"
                if isinstance(arg, type) and hasattr(arg, "model_fields"):
                    walk(arg)
                todo += get_args(arg)

    walk(DecisionTrace)


def test_each_shared_state_is_written_once_and_referenced(factory: TraceFactory) -> None:
    enc = Encoder()
    originals = list(factory.traces(10))
    out = [item for t in originals for item in enc.encode(t)]
    snapshots = [orjson.loads(p) for k, p in out if k is Kind.SNAPSHOT]
    traces = [orjson.loads(p) for k, p in out if k is Kind.TRACE]
    assert len(traces) == 10 and len(snapshots) == 2 * 4  # two scrape rounds of four instances
    ids = {s["snapshot_id"] for s in snapshots}
    assert {c["state_id"] for t in traces for c in t["candidates"]} == ids
    assert all("state" not in c for t in traces for c in t["candidates"]) and traces[0]["detail"] is True
    stored = InstanceSnapshot.model_validate({k: v for k, v in snapshots[0].items()
                                              if k not in ("snapshot_id", "seen_at")})
    first = originals[0].candidates[0]
    assert stored == first.state.model_copy(update={"age_s": None, "stale": False})  # type: ignore[union-attr]
    decided = traces[0]["candidates"][0]
    assert (decided["state_age_s"], decided["state_stale"]) == (first.state.age_s, first.state.stale)  # type: ignore[union-attr]


def test_states_that_differ_only_in_their_age_at_the_decision_are_one_snapshot(factory: TraceFactory) -> None:
    # The router stamps a copy of a scraped state per tenth of a second of age: each was a snapshot row of
    # its own (about 3 a request with four instances, 111 with 200); the age is the decision's, kept beside.
    enc = Encoder()
    trace = next(iter(factory.traces(1)))
    aged = []
    for tenth in range(1, 6):
        cands = [c.model_copy(update={"state": c.state.model_copy(update={"age_s": tenth / 10, "stale": tenth > 4})})
                 if c.state is not None else c for c in trace.candidates]
        aged.append(trace.model_copy(update={"request_id": f"req_aged_{tenth}", "candidates": cands}))
    out = [item for t in aged for item in enc.encode(t)]
    snapshots = [p for k, p in out if k is Kind.SNAPSHOT]
    with_state = sum(c.state is not None for c in trace.candidates)
    assert len(snapshots) == with_state  # one each, not one per age
    rows = [orjson.loads(p) for k, p in out if k is Kind.TRACE]
    assert [r["candidates"][0]["state_age_s"] for r in rows] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert [r["candidates"][0]["state_stale"] for r in rows] == [False] * 4 + [True]


def test_a_trace_that_fails_to_encode_leaves_its_snapshots_to_the_next_trace(factory: TraceFactory) -> None:
    # A lone surrogate (a header byte that was not UTF-8) makes orjson refuse the trace after its new
    # snapshots were given: they went nowhere, so the trace that refers to them next must give them.
    enc = Encoder()
    trace = factory.trace()
    bad = trace.model_copy(update={"router_version": "v\udcff"})
    with pytest.raises(TypeError):
        enc.encode(bad)
    kinds = [k for k, _ in enc.encode(trace)]
    assert kinds.count(Kind.SNAPSHOT) == len({c.state.instance for c in trace.candidates if c.state is not None}) > 0
    assert kinds[-1] is Kind.TRACE


def test_traces_outside_the_detail_sample_keep_a_summary_and_say_so(factory: TraceFactory) -> None:
    trace = factory.trace()
    kinds = Encoder(detail_share=0.0).encode(trace)
    assert [k for k, _ in kinds] == [Kind.TRACE]
    doc = orjson.loads(kinds[0][1])
    assert doc["detail"] is False
    assert all(c["state_id"] is None and c["score_terms"] == [] for c in doc["candidates"])
    assert [c["instance"] for c in doc["candidates"]] == [c.instance for c in trace.candidates]
    assert doc["candidates"][0]["violations"] == orjson.loads(dumps(trace))["candidates"][0]["violations"]


@pytest.mark.parametrize("share", [0.1, 0.5])
def test_sampling_is_deterministic_and_close_to_the_share(share: float) -> None:
    ids = [f"req_{i:06d}" for i in range(4000)]
    picked = [is_detailed(r, share) for r in ids]
    assert picked == [is_detailed(r, share) for r in ids]
    assert abs(sum(picked) / len(ids) - share) < 0.05
    assert picked != [is_detailed(f"req_{i:06d}x", share) for i in range(4000)]  # a hash, not a pattern
