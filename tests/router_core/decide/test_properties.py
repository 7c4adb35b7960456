"""Property tests: whatever the state, weights and thresholds in range, decide() never raises, and
the chosen instance is feasible whenever anything is."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import InstanceSnapshot, LatchState
from tests.router_core.conftest import FLEET, decide, make_config, snap

IDS = [i["id"] for i in FLEET]

snapshots = st.builds(
    lambda kv, queue, age, out, err: (kv, queue, age, out, err),
    st.one_of(st.none(), st.floats(0, 1)),
    st.one_of(st.none(), st.floats(0, 1e6)),
    st.one_of(st.none(), st.floats(0, 100)),
    st.booleans(),
    st.one_of(st.none(), st.floats(0, 1)),
)
weights = st.dictionaries(st.sampled_from(["mem", "queue", "warmup", "error", "quality", "latency", "cost",
                                           "balance"]), st.floats(0, 10), max_size=8)


Raw = tuple[float | None, float | None, float | None, bool, float | None]


def build(raw: list[Raw]) -> dict[str, InstanceSnapshot]:
    return {iid: snap(iid, kv=kv, queue=q, age=age, error_rate=err,
                      latches=[LatchState(constraint="kv-cache", out=out, value=kv)])
            for iid, (kv, q, age, out, err) in zip(IDS, raw, strict=True)}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(snapshots, min_size=3, max_size=3), w=weights,
       threshold=st.floats(0.01, 1.0), picker=st.sampled_from(["max", "p2c", "softmax"]),
       rid=st.text(min_size=1, max_size=20))
def test_the_pick_is_feasible_whenever_anything_is(raw, w, threshold, picker, rid) -> None:  # type: ignore[no-untyped-def]
    cfg = make_config(scoring={"preset": "balanced", "weights": w}, router={"picker": picker},
                      constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": threshold,
                                    "soft_threshold": threshold / 2}])
    ranked, trace = decide(build(raw), cfg, request_id=rid)
    feasible = {c.instance for c in trace.candidates if c.feasible}
    if feasible:
        assert ranked and ranked[0] in feasible and trace.selected_instance == ranked[0]
        assert set(ranked) == feasible
    else:
        assert set(ranked) == set(IDS) and trace.fallback_triggered  # fail open, recorded
    for c in trace.candidates:
        assert c.total is None or 0.0 <= c.total <= sum(w.weight for w in trace.score_weights) + 1e-9
        assert all(0.0 <= x <= 1.0 for x in c.score_terms)
