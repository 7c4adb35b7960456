"""The stored trace's contract checked on Arrow columns: never accepting what pydantic refuses."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import orjson
import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bench.synthetic import TraceFactory
from ingest.codec import fast_decoder
from ingest.codec.contract import contract_for
from ingest.codec.encoder import Encoder
from ingest.codec.storage_schema import storage_schema
from ingest.codec.to_arrow import parse_payloads
from ingest.codec.unchecked import CONTRACT_FROM, check_traces, stored_form_error, trace_contract
from ingest.kinds import Kind
from ingest.record_sink import RecordBatch
from schemas import AttemptStatus
from schemas.common import RoutingMode
from schemas.trace import Attempt, DecisionTrace, ShadowDecision
from schemas.trace_inputs import BlockedInstance, BudgetInput, DecisionInputs, ModeInput, ModelWeight
from schemas.trace_policy import AttachmentInfo, ClauseTried, IntentVerdict, KeywordMatch, PolicyStep
from tests.ingest.codec.test_unchecked import OUTCOME, recorders
from tests.ingest.plain_values import plain_of

pytestmark = pytest.mark.skipif(not fast_decoder.AVAILABLE, reason="the C decoder is not built")


def _full(trace: DecisionTrace) -> DecisionTrace:
    """``trace`` with every optional part filled in, so that each nested field's contract is exercised."""
    step = PolicyStep(
        policy="p.yaml sha256:0123", rule="legal", tried=[ClauseTried(rule="legal", matched=True, detail=["a: true"])],
        target="m-a", chain=["m-b"], chain_used=["m-a", "m-b"], throttled="wait", waited_s=0.25,
        intent=IntentVerdict(label=None, nearest="contract", confidence=0.41, threshold=0.55, abstained=True,
                             path="embedding", cut_tokens=512, waited_s=3.25),
        keywords=[KeywordMatch(pattern="(年报|财报)", weight=3.0)], keyword_score=3.0,
        attachments=[AttachmentInfo(message=0, part=1, declared="pdf", detected="docx", bytes=2048, mismatch=True)])
    inputs = DecisionInputs(
        local_hour=9, skip_primary=True, affinity="i-1",
        mode=ModeInput(mode=RoutingMode.STATIC, seq=3, safe_model="m-a", weights=[ModelWeight(model="m-a", weight=2)],
                       reason="r"),
        budget=BudgetInput(band="amber", use=0.8, cost_factor=2.0, stopped=["m-b"], governs_all=True, reason="b"),
        blocked=[BlockedInstance(instance="i-2", scope="instance", state=2, reason="open")])
    shadow = ShadowDecision(router_version="v2", policy_hash="sha256:cc", arm="b", selected_model="m",
                            selected_instance="i", live_rank=2, flipped=True, latency_ms=0.25)
    attempts = [Attempt(seq=0, instance="i-1", model="m-a", status=AttemptStatus.HTTP_ERROR, http_status=503,
                        error_class="HTTP 503", latency_ms=2.0, span_id="00f067aa0ba902b7", start_ms=0.5)]
    return trace.model_copy(update={
        "policy": step, "inputs": inputs, "shadow": shadow, "attempts": [*attempts, *trace.attempts],
        "experiment_arm": "b", "otel_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "otel_span_id": "00f067aa0ba902b8",
        "otel_parent_span_id": "00f067aa0ba902b9", "otel_trace_flags": "01", "otel_trace_state": "vendor=abc",
        "selection_probability": 0.5})


def _decided() -> list[DecisionTrace]:
    """Real decisions (soft and hard verdicts, score terms, a latched instance), with the rest filled in."""
    out = []
    for _, rec in recorders():
        trace = _full(rec.finish(OUTCOME.model_copy(update={"error_class": "timeout", "ttft_ms": 3.0})))
        steps = [s.model_copy(update={"plugin": "p/t", "duration_us": 4.0, "instances": ["i-1"], "rejected": ["i-2"]})
                 for s in trace.decision_trace]
        policy = trace.policy.model_copy(update={"intent": trace.policy.intent.model_copy(update={  # type: ignore
            "label": "contract", "abstained": False})})
        cands = [c.model_copy(update={"probability": 0.25, "violations": [
            v.model_copy(update={"since": trace.ts}) for v in c.violations]}) for c in trace.candidates]
        features = trace.features.model_copy(update={"file_types": ["pdf"], "max_tokens": 16})
        out.append(trace.model_copy(update={
            "candidates": cands, "decision_trace": steps, "policy": policy, "features": features,
            "fallback_reason": "no feasible instance", "intent": "chat"}))
    return out


def _payload(trace: DecisionTrace, detail_share: float = 1.0) -> bytes:
    return Encoder(detail_share).plain_trace(plain_of(trace))[-1][1]


def _traces() -> list[DecisionTrace]:
    (plain,) = TraceFactory(seed=5, n_candidates=4).traces(1)
    return [_full(plain), _decided()[4]]  # the second: soft and hard verdicts, a latched instance


def _fast(payload: bytes) -> bool:
    contract = trace_contract()
    assert contract is not None
    return contract.checked([payload]) is not None


def _leaf_paths(dtype: pa.DataType, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if pa.types.is_struct(dtype):
        for f in dtype:
            yield from _leaf_paths(f.type, (*path, f.name))
    elif pa.types.is_list(dtype):
        yield from _leaf_paths(dtype.value_type, path)
    else:
        yield path


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every place in a JSON value (the first item of a list), with what is there."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:1]):
            yield from _places(item, (*path, i))


# Each place gets each of these in turn (and, in an object, is left out): wrong types, bounds' edges,
# strings of the patterns' shapes, enum and literal values of other fields, datetimes at Python's limits.
REPLACEMENTS: list[Any] = [
    None, -1, 0, 1, 2, 24, -0.5, 0.5, 1.5, 10**19, 1e300, True, "1", "", "x", "é" * 129, "0" * 16, "0" * 32, "00",
    "zz", "sha256:" + "0" * 64, "hmac-sha256:" + "f" * 64, "sha256:" + "G" * 64, "ok", "hard", "soft", "chain",
    "embedding", "static", "2026-02-29T00:00:00Z", "2024-02-29T23:59:59.999999+05:30", "0001-01-01T00:00:00+01:00",
    "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00", "2026-01-01 12:00:00", "2026-01-01T12:00", [], [None],
    {}, {"unknown": 1},
]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _drop(doc: Any, path: tuple[Any, ...]) -> None:
    for key in path[:-1]:
        doc = doc[key]
    del doc[path[-1]]


def test_the_traces_cover_every_stored_field() -> None:
    """So that the mutations below reach every field's contract, nested ones included."""
    seen = set()
    for trace in _traces():
        for path, value in _places(orjson.loads(_payload(trace))):
            if value is not None and not isinstance(value, (dict, list)):
                seen.add(tuple(k for k in path if isinstance(k, str)))
    missing = set(_leaf_paths(pa.struct(list(storage_schema(Kind.TRACE))))) - seen
    assert not missing


def test_what_the_columns_accept_pydantic_accepts_too() -> None:
    both = columns_only = pydantic_only = 0
    for trace in _traces():
        payload = _payload(trace)
        assert _fast(payload) and stored_form_error(payload) is None  # the valid ones pass both
        doc = orjson.loads(payload)
        for path, _ in list(_places(doc)):
            if not path:
                continue
            mutants = [orjson.loads(payload) for _ in range(len(REPLACEMENTS) + 1)]
            for mutant, value in zip(mutants, REPLACEMENTS, strict=False):
                _set(mutant, path, value)
            if isinstance(path[-1], str):
                _drop(mutants[-1], path)
            else:
                mutants.pop()
            for mutant in mutants:
                raw = orjson.dumps(mutant)
                fast, valid = _fast(raw), stored_form_error(raw) is None
                assert valid or not fast, f"{path} = {mutant}: the columns accepted what pydantic refuses"
                both += fast and valid
                columns_only += fast and not valid
                pydantic_only += valid and not fast
    assert columns_only == 0
    # not a check that refuses everything: most of what pydantic accepts, the columns accept too
    assert both > 3 * pydantic_only, (both, pydantic_only)


def test_a_checked_batch_is_the_table_the_store_would_have_parsed() -> None:
    payloads = [_payload(t, share) for share in (1.0, 0.3) for t in TraceFactory(seed=8, n_candidates=5).traces(40)]
    payloads += [_payload(t) for t in _traces()]
    batch = RecordBatch({Kind.TRACE_UNCHECKED: list(payloads)})
    checked = check_traces(batch)
    assert checked.rejected == [] and batch.payloads == {Kind.TRACE: payloads}
    parsed, refused = parse_payloads(Kind.TRACE, payloads)
    assert refused == [] and checked.table is not None and parsed is not None
    assert checked.table.equals(parsed)


def test_one_bad_trace_sends_its_batch_through_pydantic_and_is_refused_with_the_reason() -> None:
    good = [_payload(t) for t in TraceFactory(seed=9, n_candidates=3).traces(CONTRACT_FROM)]
    values = plain_of(next(TraceFactory(seed=10, n_candidates=3).traces(1)))
    bad = Encoder().plain_trace(values | {"request_id": "bad", "intent_confidence": 1.5})[-1][1]
    batch = RecordBatch({Kind.TRACE_UNCHECKED: [*good[:10], bad, *good[10:]]})
    checked = check_traces(batch)
    assert checked.table is None and batch.payloads == {Kind.TRACE: good}
    assert [r.payload for r in checked.rejected] == [bad] and "intent_confidence" in checked.rejected[0].reason
    # beside traces checked before, the columns check the new ones but leave the table to the store's parse
    mixed = RecordBatch({Kind.TRACE: [good[0]], Kind.TRACE_UNCHECKED: good[1:]})
    checked = check_traces(mixed)
    assert checked.rejected == [] and checked.table is None and mixed.payloads == {Kind.TRACE: good}


def test_small_batches_are_left_to_pydantic() -> None:
    payloads = [_payload(t) for t in TraceFactory(seed=12, n_candidates=3).traces(CONTRACT_FROM - 1)]
    checked = check_traces(RecordBatch({Kind.TRACE_UNCHECKED: payloads}))
    assert checked.rejected == [] and checked.table is None


class _Validated(BaseModel):
    name: str

    @field_validator("name")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class _Union(BaseModel):
    value: int | str


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True)

    count: int


class _Plain(BaseModel):
    count: int = Field(ge=0)
    when: str | None = None


def test_a_model_with_a_check_the_columns_cannot_express_has_no_contract() -> None:
    assert contract_for(_Validated, pa.schema([pa.field("name", pa.string())])) is None
    assert contract_for(_Union, pa.schema([pa.field("value", pa.string())])) is None
    assert contract_for(_Strict, pa.schema([pa.field("count", pa.int64())])) is None
    assert contract_for(_Plain, pa.schema([pa.field("count", pa.string())])) is None  # stored as another type
    contract = contract_for(_Plain, pa.schema([pa.field("count", pa.int64()), pa.field("when", pa.string())]))
    assert contract is not None
    assert contract.checked([b'{"count": 1}', b'{"count": 0, "when": null}']) is not None
    for refused in (b'{"when": "x"}', b'{"count": null}', b'{"count": -1}', b'{"count": 1, "other": 1}'):
        assert contract.checked([b'{"count": 1}', refused]) is None, refused


def test_datetimes_python_cannot_hold_are_left_to_pydantic() -> None:
    (trace,) = TraceFactory(seed=13, n_candidates=2).traces(1)
    for ts in ("0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
        raw = orjson.dumps(orjson.loads(_payload(trace)) | {"ts": ts})
        assert not _fast(raw)
    near = orjson.dumps(orjson.loads(_payload(trace)) | {"ts": (trace.ts + timedelta(days=1)).isoformat()})
    assert _fast(near) and stored_form_error(near) is None
