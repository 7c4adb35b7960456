import pytest

from router_core.errors import UnknownModel
from schemas import LatchState, RoutingMode, StepKind
from tests.router_core.conftest import decide, features, healthy, make_config, snap


def cand(trace, iid):  # type: ignore[no-untyped-def]
    return next(c for c in trace.candidates if c.instance == iid)


def test_the_seed_score_orders_instances() -> None:
    ranked, trace = decide(healthy())
    # big-b: .4*.8 + .3*1 + .2 + .1 = 0.92; big-a: .4*.5+.3+.3 = 0.8; small-a: .4*.7+.3*.6+.3 = 0.76
    assert ranked == ["big-b", "big-a", "small-a"]
    assert cand(trace, "big-b").total == pytest.approx(0.92)
    assert cand(trace, "small-a").total == pytest.approx(0.76)
    assert [cand(trace, i).rank for i in ranked] == [1, 2, 3]
    assert [w.name for w in trace.score_weights] == ["mem", "queue", "warmup", "error"]
    assert trace.terms_of(cand(trace, "big-a"))[0] == ("mem", 0.5, 0.4, 0.2)
    assert trace.selected_instance == "big-b" and trace.mode is RoutingMode.NORMAL


def test_a_latched_out_instance_is_rejected_with_the_violation() -> None:
    out = LatchState(constraint="kv-cache", out=True, value=0.91)
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.91, latches=[out])})
    assert "big-b" not in ranked and ranked[0] == "big-a"
    (violation,) = cand(trace, "big-b").violations
    assert (violation.constraint, violation.value, violation.threshold, violation.severity) == (
        "kv-cache", 0.91, 0.85, "hard")
    step = next(s for s in trace.decision_trace if s.step == "filter/kv-cache")
    assert step.kind is StepKind.FILTER and step.rejected == ["big-b"]
    assert step.plugin == "kv-cache/constraint-filter"


def test_a_latched_in_instance_stays_even_above_the_threshold() -> None:
    # Hysteresis: the latch has not tripped yet (exit_for not elapsed), so the instance stays.
    kept = LatchState(constraint="kv-cache", out=False, value=0.9)
    ranked, _ = decide(healthy() | {"big-b": snap("big-b", kv=0.9, latches=[kept])})
    assert "big-b" in ranked


def test_without_a_latch_the_constraint_is_judged_instantly() -> None:
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.91)})
    assert "big-b" not in ranked and cand(trace, "big-b").violations[0].since is None


def test_soft_threshold_ramps_the_score_down() -> None:
    cfg = make_config(constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85,
                                   "soft_threshold": 0.75}])
    state = healthy() | {"big-a": snap("big-a", kv=0.8, latches=[LatchState(constraint="kv-cache", out=False,
                                                                            value=0.8)])}
    ranked, trace = decide(state, cfg)
    a = cand(trace, "big-a")
    assert a.feasible and a.weight_factor == pytest.approx(0.5)
    assert a.violations[0].severity == "soft" and a.violations[0].score_factor == pytest.approx(0.5)
    assert a.total == pytest.approx(0.5 * (0.4 * 0.2 + 0.3 + 0.2 + 0.1))
    assert ranked.index("big-a") == 2


def test_missing_or_stale_state_is_pessimistic() -> None:
    state = healthy() | {"big-b": snap("big-b", age=None), "big-a": snap("big-a", age=30.0)}
    ranked, trace = decide(state)
    assert ranked == ["small-a"]
    assert cand(trace, "big-b").violations[0].reason.startswith("never scraped")
    assert "30.0s old" in cand(trace, "big-a").violations[0].reason


def test_suspect_state_decays_toward_saturated() -> None:
    # 4 s old: suspect (3 s) but not stale (5 s): still feasible, but its free KV is discounted.
    fresh, _ = decide(healthy())
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.2, age=4.0)})
    assert fresh[0] == "big-b" and ranked[0] == "big-a"
    assert trace.terms_of(cand(trace, "big-b"))[0][1] == pytest.approx(1 - (0.2 + 0.8 * 0.5))


def test_context_window_filter() -> None:
    ranked, trace = decide(healthy(), feats=features(tokens=8000, max_tokens=1000))
    assert "small-a" not in ranked
    v = cand(trace, "small-a").violations[0]
    assert v.constraint == "context-window" and v.value == 9000 and v.threshold == 8192


def test_zone_rule() -> None:
    cfg = make_config(router={"zones": ["eu"]}, fleet={"instances": [
        {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1", "zone": "eu"},
        {"id": "big-b", "model": "big", "url": "http://127.0.0.1:2", "zone": "us"},
        {"id": "small-a", "model": "small", "url": "http://127.0.0.1:3", "zone": "us"}]})
    ranked, trace = decide(healthy(), cfg)
    assert ranked == ["big-a"] and "zone 'us'" in cand(trace, "big-b").violations[0].reason


def test_version_rule() -> None:
    cfg = make_config(router={"min_versions": {"big": "2.0"}}, fleet={"instances": [
        {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1", "version": "2.1"},
        {"id": "big-b", "model": "big", "url": "http://127.0.0.1:2", "version": "1.9.3"},
        {"id": "small-a", "model": "small", "url": "http://127.0.0.1:3"}]})
    ranked, trace = decide(healthy(), cfg)
    assert set(ranked) == {"big-a", "small-a"}
    assert cand(trace, "big-b").violations[0].reason == "big needs version >= 2.0, instance has 1.9.3"


def test_a_removed_candidate_keeps_its_would_be_terms_but_no_total_or_rank() -> None:
    # What makes a removal "decisive" readable from the trace: big-b (the best state) is removed
    # by the version rule, and its terms say it would have won (0.92 against big-a's 0.8).
    cfg = make_config(router={"min_versions": {"big": "2.0"}}, fleet={"instances": [
        {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1", "version": "2.1", "cost": {"base": 1.8}},
        {"id": "big-b", "model": "big", "url": "http://127.0.0.1:2", "version": "1.9.3", "cost": {"base": 1.8}},
        {"id": "small-a", "model": "small", "url": "http://127.0.0.1:3", "cost": {"base": 1.0}}]})
    ranked, trace = decide(healthy(), cfg)
    b, a = cand(trace, "big-b"), cand(trace, "big-a")
    assert ranked[0] == "big-a" and not b.feasible and b.total is None and b.rank is None
    would = sum(weighted for *_, weighted in trace.terms_of(b))
    assert would == pytest.approx(0.92) and a.total == pytest.approx(0.8) and would > a.total
    # A removal that would not have won: big-b latched out at kv 0.91 scores .4*.09 + .3 + .2 + .1.
    out = LatchState(constraint="kv-cache", out=True, value=0.91)
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.91, latches=[out])})
    b = cand(trace, "big-b")
    assert sum(weighted for *_, weighted in trace.terms_of(b)) == pytest.approx(0.636)
    assert ranked == ["big-a", "small-a"] and cand(trace, "big-a").total == pytest.approx(0.8)


def test_requested_model_restricts_candidates() -> None:
    ranked, trace = decide(healthy(), feats=features(model="small"))
    assert ranked == ["small-a"] and trace.rule == "model:small"
    with pytest.raises(UnknownModel):
        decide(healthy(), feats=features(model="nope"))


def test_nothing_feasible_fails_open_and_says_so() -> None:
    state = {k: snap(k, kv=0.99) for k in healthy()}
    ranked, trace = decide(state)
    assert len(ranked) == 3 and trace.mode is RoutingMode.FAIL_OPEN and trace.fallback_triggered
    assert "no feasible instance" in (trace.fallback_reason or "")
    assert any(s.kind is StepKind.FALLBACK for s in trace.decision_trace)


def test_nothing_feasible_can_reject_or_use_the_fallback_model() -> None:
    hot = healthy() | {"big-a": snap("big-a", kv=0.99), "big-b": snap("big-b", kv=0.99)}
    ranked, trace = decide(hot, make_config(router={"on_empty": "reject"}), feats=features(model="big"))
    assert ranked == [] and trace.selected_instance is None and trace.fallback_triggered
    ranked, trace = decide(hot, make_config(router={"fallback_model": "small"}), feats=features(model="big"))
    assert ranked == ["small-a"] and "fallback model small" in (trace.fallback_reason or "")


def test_quality_for_the_request_class_moves_traffic() -> None:
    cfg = make_config(scoring={"preset": "balanced", "weights": {"cost": 0.0}},
                      models={"big": {"quality": {"contract": 0.95, "ticket": 0.6}},
                              "small": {"quality": {"contract": 0.5, "ticket": 0.9}}})
    contract, _ = decide(healthy(), cfg, intent="contract")
    ticket, trace = decide(healthy(), cfg, intent="ticket")
    assert contract[0].startswith("big") and ticket[0] == "small-a"
    assert [w.name for w in trace.score_weights] == ["quality", "latency", "balance"]  # zero weight: not scored


def test_time_of_day_profile_changes_weights() -> None:
    cfg = make_config(scoring={"preset": "balanced", "profiles": [
        {"name": "night", "hours": [22, 6], "weights": {"quality": 0.9, "cost": 0.0}}]})
    _, day = decide(healthy(), cfg)
    _, night = decide(healthy(), cfg, now=day.ts.replace(hour=2))
    assert {w.name: w.weight for w in day.score_weights}["quality"] == 0.4
    assert {w.name: w.weight for w in night.score_weights} == {"quality": 0.9, "latency": 0.3, "balance": 0.1}
    assert "(night)" in next(s.reason for s in night.decision_trace if s.step == "score/quality")


def test_ties_are_deterministic_per_request_and_spread_across_requests() -> None:
    state = {"big-a": snap("big-a"), "big-b": snap("big-b"), "small-a": snap("small-a")}
    assert decide(state, request_id="r1")[0] == decide(state, request_id="r1")[0]
    winners = {decide(state, request_id=f"r{i}")[0][0] for i in range(30)}
    assert winners == {"big-a", "big-b", "small-a"}


@pytest.mark.parametrize("picker", ["p2c", "softmax"])
def test_sampling_pickers_are_seeded_recorded_and_spread(picker: str) -> None:
    cfg = make_config(router={"picker": picker, "softmax_temperature": 0.5})
    picks = [decide(healthy(), cfg, request_id=f"r{i}") for i in range(40)]
    assert decide(healthy(), cfg, request_id="r7")[0] == picks[7][0]  # same request, same pick
    assert len({ranked[0] for ranked, _ in picks}) >= 2  # several gateways would not herd
    reason = next(s.reason for s in picks[0][1].decision_trace if s.step == "pick")
    assert reason.startswith(picker) and "seed mmh3" in reason


def test_trace_is_complete_and_ordered() -> None:
    _, trace = decide(healthy())
    kinds = [s.kind for s in trace.decision_trace]
    assert kinds[0] is StepKind.ANALYSE and kinds[1] is StepKind.POLICY and kinds[-1] is StepKind.PICK
    assert [s.seq for s in trace.decision_trace] == list(range(len(kinds)))
    assert trace.selected_instance == "big-b" and trace.latency_ms > 0
    assert all(c.state is not None for c in trace.candidates)
