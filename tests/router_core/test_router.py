from itertools import count

import pytest

from router_core.builtin import build_router, policy_hash
from router_core.errors import UnknownModel
from router_core.recorder import TraceRecorder
from schemas import InstanceSnapshot, Outcome, OutcomeStatus, RequestFeatures, RoutingMode, StepKind
from schemas.config import RouteLensConfig
from tests.factories import T0

CONFIG = RouteLensConfig.model_validate({
    "fleet": {"instances": [
        {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1", "context_window": 32768},
        {"id": "big-b", "model": "big", "url": "http://127.0.0.1:2", "context_window": 32768},
        {"id": "small-a", "model": "small", "url": "http://127.0.0.1:3", "context_window": 8192},
    ]},
})


def snap(iid: str, model: str, kv: float | None = 0.1, queue: float | None = 0, age: float | None = 0.5,
         **kw: float) -> InstanceSnapshot:
    return InstanceSnapshot(instance=iid, model=model, kv_cache_usage=kv, queue=queue, age_s=age,
                            stale=age is None, **kw)


def features(model: str = "auto", tokens: int = 100, max_tokens: int | None = None) -> RequestFeatures:
    return RequestFeatures(requested_model=model, n_messages=1, input_chars=tokens * 4,
                           est_input_tokens=tokens, max_tokens=max_tokens)


def decide(state: dict[str, InstanceSnapshot], feats: RequestFeatures | None = None, request_id: str = "r1"):
    ticks = count()
    router = build_router(CONFIG, perf=lambda: next(ticks) * 1e-6)
    rec = TraceRecorder(request_id=request_id, ts=T0, router_version="t", policy_hash=policy_hash(CONFIG),
                        query_hash="sha256:" + "0" * 64, features=feats or features())
    ranked = router.decide(rec.features, state, rec)
    return [s.id for s in ranked], rec


def healthy() -> dict[str, InstanceSnapshot]:
    return {"big-a": snap("big-a", "big", kv=0.5), "big-b": snap("big-b", "big", kv=0.2),
            "small-a": snap("small-a", "small", kv=0.3, queue=4)}


def test_the_seed_score_orders_instances() -> None:
    ranked, rec = decide(healthy())
    # big-b: .4*.8 + .3*1 + .2 + .1 = 0.92; big-a: .4*.5+.3+.3 = 0.8; small-a: .4*.7+.3*.6+.3 = 0.76
    assert ranked == ["big-b", "big-a", "small-a"]
    by_id = {c.instance: c for c in rec.candidates}
    assert by_id["big-b"].total == pytest.approx(0.92)
    assert by_id["small-a"].total == pytest.approx(0.76)
    assert [by_id[i].rank for i in ranked] == [1, 2, 3]
    assert {t.name for t in by_id["big-a"].score_terms} == {"mem", "queue", "warmup", "error"}
    assert rec.selected == ("big", "big-b") and rec.mode is RoutingMode.NORMAL


def test_kv_cache_constraint_rejects_and_records_the_violation() -> None:
    state = healthy() | {"big-b": snap("big-b", "big", kv=0.91)}
    ranked, rec = decide(state)
    assert "big-b" not in ranked and ranked[0] == "big-a"
    (violation,) = next(c for c in rec.candidates if c.instance == "big-b").violations
    assert (violation.constraint, violation.value, violation.threshold) == ("kv-cache", 0.91, 0.85)
    step = next(s for s in rec.steps if s.step == "filter/kv-cache")
    assert step.kind is StepKind.FILTER and step.rejected == ["big-b"]
    assert step.plugin == "kv-cache/metric-threshold-filter"


def test_missing_or_stale_state_is_pessimistic() -> None:
    state = healthy() | {"big-b": snap("big-b", "big", age=None), "big-a": snap("big-a", "big", age=30.0)}
    ranked, rec = decide(state)
    assert ranked == ["small-a"]
    reasons = {c.instance: c.violations[0].reason for c in rec.candidates if c.violations}
    assert reasons["big-b"].startswith("never scraped") and "30.0s old" in reasons["big-a"]


def test_context_window_filter() -> None:
    ranked, rec = decide(healthy(), features(tokens=8000, max_tokens=1000))
    assert "small-a" not in ranked
    v = next(c for c in rec.candidates if c.instance == "small-a").violations[0]
    assert v.constraint == "context-window" and v.value == 9000 and v.threshold == 8192


def test_requested_model_restricts_candidates() -> None:
    ranked, rec = decide(healthy(), features(model="small"))
    assert ranked == ["small-a"] and rec.rule == "model:small"
    with pytest.raises(UnknownModel):
        decide(healthy(), features(model="nope"))


def test_nothing_feasible_fails_open_and_says_so() -> None:
    state = {k: snap(k, v.model, kv=0.99) for k, v in healthy().items()}
    ranked, rec = decide(state)
    assert len(ranked) == 3 and rec.mode is RoutingMode.FAIL_OPEN
    assert rec.fallback_reason and "no feasible instance" in rec.fallback_reason
    trace = rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0))
    assert trace.fallback_triggered and any(s.kind is StepKind.FALLBACK for s in trace.decision_trace)


def test_ties_are_deterministic_per_request_and_spread_across_requests() -> None:
    state = {"big-a": snap("big-a", "big"), "big-b": snap("big-b", "big"), "small-a": snap("small-a", "small")}
    assert decide(state, request_id="r1")[0] == decide(state, request_id="r1")[0]
    winners = {decide(state, request_id=f"r{i}")[0][0] for i in range(30)}
    assert winners == {"big-a", "big-b", "small-a"}


def test_trace_is_complete_and_ordered() -> None:
    _, rec = decide(healthy())
    trace = rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=2.0))
    kinds = [s.kind for s in trace.decision_trace]
    assert kinds[0] is StepKind.ANALYSE and kinds[1] is StepKind.POLICY and kinds[-1] is StepKind.PICK
    assert [s.seq for s in trace.decision_trace] == list(range(len(kinds)))
    assert trace.selected_instance == "big-b" and trace.latency_ms > 0
