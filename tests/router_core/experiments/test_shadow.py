"""Shadow decisions: the shadow's choice, its rank of the live choice, and whether the decision flipped."""

from __future__ import annotations

from itertools import count

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.experiments import ShadowPolicy, arm_config, compare
from router_core.state.quality import QualityTable
from schemas.config.experiments import PolicySections
from tests.router_core.conftest import NOW, features, healthy, make_config


def banning(instance: str) -> PolicySections:
    """A policy under which ``instance`` is out (its KV-cache use is above 0)."""
    return PolicySections.model_validate({"constraints": [
        {"name": "ban", "metric": "kv_cache_usage", "op": "<=", "threshold": 0.0, "instances": [instance]}]})


def ctx(request_id: str = "r1") -> DecisionContext:
    return DecisionContext(request_id=request_id, features=features(), intent="chat", now=NOW,
                           quality=QualityTable({}).snapshot())


def shadow_of(sections: PolicySections | None, sample: float = 1.0) -> ShadowPolicy:
    ticks = count()
    router = build_router(arm_config(make_config(), sections))
    return ShadowPolicy(router, "v-shadow", sample, perf=lambda: next(ticks) * 1e-3)


def test_the_same_policy_never_flips_and_ranks_the_live_choice_first() -> None:
    live_router, state = build_router(make_config()), healthy()
    shadow = shadow_of(None)
    for i in range(50):
        live = live_router.decide(ctx(f"r{i}"), state)
        got = shadow.decide(ctx(f"r{i}"), state, live)
        assert got is not None and not got.flipped and got.live_rank == 1
        assert got.selected_instance == live.selected.id if live.selected else False
        assert got.router_version == "v-shadow" and got.policy_hash == live_router.policy.hash
        assert abs(got.latency_ms - 1.0) < 1e-9  # the injected clock: one tick


def test_a_policy_that_rules_the_live_choice_out_flips_and_has_no_rank() -> None:
    state = healthy()
    live = build_router(make_config()).decide(ctx(), state)
    assert live.selected is not None
    got = shadow_of(banning(live.selected.id)).decide(ctx(), state, live)
    assert got is not None and got.selected_instance not in (None, live.selected.id)
    assert (got.flipped, got.live_rank) == (True, None)
    assert got.selected_model == next(s.model for s in live.targets if s.id == got.selected_instance)


def test_compare_ranks_the_live_choice_under_the_shadow() -> None:
    state = healthy()
    live = build_router(make_config()).decide(ctx(), state)
    other = build_router(make_config(scoring={"preset": "seed-instance-score"})).decide(ctx(), state)
    model, instance, rank, flipped = compare(live, other)
    assert instance == (other.selected.id if other.selected else None)
    assert flipped == (instance != (live.selected.id if live.selected else None))
    assert rank == next(c["rank"] for c in other.candidates if c["instance"] == (live.selected.id
                                                                                  if live.selected else ""))


def test_sampling_is_by_request_id_and_respects_the_share() -> None:
    shadow = shadow_of(None, sample=0.25)
    ids = [f"req-{i}" for i in range(20_000)]
    sampled = [r for r in ids if shadow.wants(r)]
    assert sampled == [r for r in ids if shadow.wants(r)]  # deterministic: no global random
    assert abs(len(sampled) - 5000) <= 5 * (20_000 * 0.25 * 0.75) ** 0.5
    assert all(shadow_of(None, 1.0).wants(r) for r in ids[:100])
    assert not any(shadow_of(None, 0.0).wants(r) for r in ids[:1000])


def test_a_job_carries_the_live_context_and_state() -> None:
    state, c = healthy(), ctx()
    live = build_router(make_config()).decide(c, state)
    assert live.selected is not None
    job = shadow_of(banning(live.selected.id)).job(c, state, live)
    assert job is not None and job.state is state and job.ctx is c
    result = job()
    assert result is not None and result.flipped
    assert shadow_of(None, 0.0).job(c, state, live) is None
