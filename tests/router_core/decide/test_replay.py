from router_core.decide.replay import replay
from schemas import DecisionTrace, LatchState
from tests.router_core.conftest import decide, healthy, make_config, snap


def test_replaying_under_the_same_policy_reproduces_the_decision() -> None:
    cfg = make_config(scoring={"preset": "balanced"}, models={"big": {"quality": {"chat": 0.9}}})
    for i in range(20):
        state = healthy() | {"big-a": snap("big-a", kv=0.05 * i, queue=i % 5)}
        ranked, trace = decide(state, cfg, request_id=f"r{i}")
        again = replay(DecisionTrace.model_validate_json(trace.model_dump_json()), cfg)  # through storage
        assert again.ranked == ranked and again.selected_instance == trace.selected_instance
        assert [c.total for c in again.trace.candidates] == [c.total for c in trace.candidates]


def test_a_stricter_policy_changes_the_decision_where_expected() -> None:
    state = healthy() | {"big-b": snap("big-b", kv=0.3, latches=[LatchState(constraint="kv-cache", out=False,
                                                                            value=0.3)])}
    ranked, trace = decide(state)
    assert ranked[0] == "big-b"
    strict = make_config(constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85},
                                      {"name": "kv-tight", "metric": "kv_cache_usage", "threshold": 0.25,
                                       "instances": ["big-b"]}])
    other = replay(trace, strict)
    assert other.selected_instance != "big-b" and "big-b" not in other.ranked
    (v,) = [v for c in other.trace.candidates if c.instance == "big-b" for v in c.violations]
    assert v.constraint == "kv-tight" and v.since is None  # judged instantly: no latch history for it
    assert other.trace.policy_hash != trace.policy_hash


def test_replay_with_different_weights_reranks() -> None:
    _, trace = decide(healthy())
    cheap_first = make_config(scoring={"preset": "balanced", "weights": {"quality": 0, "latency": 0, "balance": 0,
                                                                         "cost": 1}})
    assert replay(trace, cheap_first).selected_instance == "small-a"


def test_instances_unknown_to_the_trace_count_as_never_scraped() -> None:
    _, trace = decide(healthy(), feats=None)
    bigger = make_config(fleet={"instances": [
        {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1"},
        {"id": "new-1", "model": "big", "url": "http://127.0.0.1:9"}]})
    other = replay(trace, bigger)
    assert "new-1" not in other.ranked
    assert any(c.instance == "new-1" and not c.feasible for c in other.trace.candidates)
