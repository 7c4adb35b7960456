"""The router under a matched policy rule: primary, then the chain; guarantees; cost scale; degraded end."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from router_core.rules.load import compile_policy
from router_core.rules.request import RequestView
from router_core.rules.route import RouteChoice
from schemas import LatchState, RoutingMode
from tests.router_core.conftest import FLEET, NOW, decide, healthy, make_config, snap

FLEET_KV = [{**i, "kv_cache_bytes": "16GB"} for i in FLEET]
CONFIG = make_config(fleet={"instances": FLEET_KV})
POLICY = """
routing_matrix:
  - rule_name: to-small
    condition: "input_length > 1000"
    primary_target: small
    fallback_chain: [big, canned]
  - rule_name: roomy
    condition: "prompt_contains('roomy')"
    resource_guarantee: {min_gpu_mem: 12GB}
  - rule_name: slots
    condition: "prompt_contains('slots')"
    resource_guarantee: {reserved_cores: 14}
  - rule_name: costly
    condition: "prompt_contains('costly')"
    cost_params: {base_weight: 1.5, surge_multiplier: 2.0}
degraded_targets:
  canned: {canned: "later"}
"""
RULES = compile_policy(POLICY, "p.yaml", CONFIG)


def route(prompt: str = "", tokens: int = 100, hour: int = 15, skip_primary: bool = False) -> RouteChoice:
    view = RequestView(input_length=tokens, query_length=tokens, language="en", intent=None, intent_confidence=None,
                       file_types=(), has_attachments=False, request_time=datetime(2026, 11, 29, hour, tzinfo=UTC),
                       prompt=prompt)
    return RouteChoice(RULES, RULES.match(view), local_hour=hour, skip_primary=skip_primary,
                       throttled="chain" if skip_primary else None)


def cand(trace, iid):  # type: ignore[no-untyped-def]
    return next(c for c in trace.candidates if c.instance == iid)


def out(iid: str) -> LatchState:
    return LatchState(constraint="kv-cache", out=True, value=0.95)


def test_a_matched_rule_routes_to_its_primary_then_the_chain_after_it() -> None:
    ranked, trace = decide(healthy(), CONFIG, route=route(tokens=2000))
    # the chain's feasible instances follow (best state first), for attempts that fail
    assert ranked == ["small-a", "big-b", "big-a"]
    assert trace.rule == "to-small" and trace.mode is RoutingMode.NORMAL
    assert trace.policy is not None and trace.policy.rule == "to-small" and trace.policy.chain == ["big", "canned"]
    assert [t.rule for t in trace.policy.tried] == ["to-small"]


def test_an_infeasible_primary_goes_down_the_chain() -> None:
    state = healthy() | {"small-a": snap("small-a", kv=0.95, latches=[out("small-a")])}
    ranked, trace = decide(state, CONFIG, route=route(tokens=2000))
    assert ranked == ["big-b", "big-a"] and trace.fallback_triggered
    assert "no feasible instance of small on rule to-small; trying big" in (trace.fallback_reason or "")
    assert not cand(trace, "small-a").feasible


def test_a_throttled_request_skips_the_primary() -> None:
    ranked, trace = decide(healthy(), CONFIG, route=route(tokens=2000, skip_primary=True))
    assert ranked == ["big-b", "big-a"] and trace.policy is not None and trace.policy.throttled == "chain"


def test_nothing_feasible_on_the_chain_ends_in_its_degraded_target() -> None:
    state = {i: snap(i, kv=0.95, latches=[out(i)]) for i in ("big-a", "big-b", "small-a")}
    ranked, trace = decide(state, CONFIG, route=route(tokens=2000))
    assert ranked == [] and trace.mode is RoutingMode.RULES
    assert any("answering from canned" in s.reason for s in trace.decision_trace if s.step == "fallback")


def test_a_resource_guarantee_is_a_recorded_violation() -> None:
    # 16 GiB of KV cache: free (1 - usage) * 16 GiB >= 12 GiB needs usage <= 25%
    ranked, trace = decide(healthy(), CONFIG, route=route("roomy please"))
    assert ranked == ["big-b"]
    (v,) = [v for v in cand(trace, "big-a").violations if v.constraint == "rule/roomy"]
    assert v.metric == "free_kv_bytes" and v.value == pytest.approx(0.5 * 16 * 2**30)
    assert "guaranteed by rule roomy" in v.reason


def test_reserved_slots_count_running_and_queued_requests() -> None:
    # max_concurrency 16: small-a has 4 queued -> 12 free < 14; the big ones have 16 free
    state = {i: s.model_copy(update={"running": 0}) for i, s in healthy().items()}
    ranked, trace = decide(state, CONFIG, route=route("slots"))
    assert set(ranked) == {"big-a", "big-b"}
    assert any(v.metric == "free_slots" and v.value == 12 for v in cand(trace, "small-a").violations)


@pytest.mark.parametrize(("hour", "factor"), [(15, 3.0), (20, 1.5)], ids=["peak", "off-peak"])
def test_cost_params_scale_the_cost_weight_more_in_peak_hours(hour: int, factor: float) -> None:
    cfg = make_config(fleet={"instances": FLEET_KV}, scoring={"preset": "balanced"})
    _, plain = decide(healthy(), cfg, now=NOW.replace(hour=hour))
    _, scaled = decide(healthy(), cfg, route=route("costly", hour=hour), now=NOW.replace(hour=hour))
    weight = {w.name: w.weight for w in plain.score_weights}["cost"]
    assert {w.name: w.weight for w in scaled.score_weights}["cost"] == pytest.approx(weight * factor)


def test_no_matching_rule_routes_as_without_a_policy() -> None:
    ranked, trace = decide(healthy(), CONFIG, route=route("nothing special"))
    assert trace.rule == "auto" and ranked == decide(healthy(), CONFIG)[0]
    assert trace.policy is not None and trace.policy.rule is None and len(trace.policy.tried) == 4
