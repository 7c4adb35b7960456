"""build_policy: the sections derive what an explicit router.plugins says; profiles; policy_hash."""

from __future__ import annotations

from typing import Any

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.policy import policy_hash
from schemas import LatchState
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace
from tests.router_core.conftest import FLEET, NOW, decide, healthy, make_config, snap
from tests.router_core.plugin_kit import fleet_state, instance, step, weights

KV_RULE = {"metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.80}
DEFAULT_PLUGINS: list[dict[str, Any]] = [
    {"type": "freshness-filter", "parameters": {"max_age_s": 5.0}},
    {"type": "context-window-filter"},
    {"type": "constraint-filter", "name": "kv-cache", "parameters": KV_RULE},
    {"type": "constraint-filter", "name": "queue", "parameters": {"metric": "queue", "threshold": 10}},
    {"type": "probe-filter"},
    {"type": "breaker-filter"},
    {"type": "kv-cache-scorer", "weight": 0.4},
    {"type": "queue-depth-scorer", "weight": 0.3, "parameters": {"queue_norm": 10}},
    {"type": "warmup-scorer", "weight": 0.2},
    {"type": "error-rate-scorer", "weight": 0.1},
    {"type": "max-score-picker"},
]
RICH_FLEET = [instance("a", "big", zone="eu", version="2.1", cost={"base": 1.8}),
              instance("b", "big", zone="eu", version="1.9", cost={"base": 1.8}),
              instance("c", "small", zone="eu", cost={"base": 1.0}, context_window=8192),
              instance("d", "small", zone="us", cost={"base": 0.5}),
              instance("e", "big", zone="eu", version="2.0", cost={"base": 2.5})]
SOFT_KV = KV_RULE | {"soft_threshold": 0.75}
ERRORS = {"metric": "error_rate", "threshold": 0.3, "models": ["big"]}
COMMON = {"fleet": {"instances": RICH_FLEET}, "scrape": {"stale_after_s": 6.0},
          "models": {"big": {"quality": {"chat": 0.8}, "latency_ms": 900, "max_concurrency": 8},
                     "small": {"quality": {"chat": 0.6}}}}
RICH_SECTIONS = COMMON | {
    "router": {"zones": ["eu"], "min_versions": {"big": "2.0"}, "picker": "softmax", "softmax_temperature": 0.1},
    "constraints": [{"name": "kv-cache"} | SOFT_KV, {"name": "errors"} | ERRORS],
    "scoring": {"preset": "balanced", "weights": {"mem": 0.2, "cost": 0.5}, "queue_norm": 8, "latency_slo_ms": 2000},
}
RICH_PLUGINS: list[dict[str, Any]] = [
    {"type": "freshness-filter", "parameters": {"max_age_s": 6.0}},
    {"type": "context-window-filter"},
    {"type": "zone-filter", "parameters": {"zones": ["eu"]}},
    {"type": "version-filter", "parameters": {"min_versions": {"big": "2.0"}}},
    {"type": "constraint-filter", "name": "kv-cache", "parameters": SOFT_KV},
    {"type": "constraint-filter", "name": "errors", "parameters": ERRORS},
    {"type": "probe-filter"},
    {"type": "breaker-filter"},
    {"type": "quality-scorer", "weight": 0.4},
    {"type": "latency-scorer", "weight": 0.3, "parameters": {"latency_slo_ms": 2000}},
    {"type": "cost-scorer", "weight": 0.5},
    {"type": "balance-scorer", "weight": 0.1},
    {"type": "kv-cache-scorer", "weight": 0.2},
    {"type": "softmax-picker", "parameters": {"temperature": 0.1}},
]
# scoring.queue_norm stays: it is also the cap suspect queue/running gauges decay toward (see the decay-cap test)
RICH_EXPLICIT = COMMON | {"scoring": {"queue_norm": 8}, "router": {"plugins": RICH_PLUGINS}}


def view(trace: DecisionTrace) -> dict[str, Any]:
    """Everything a decision is, except the score steps' reasons (they name the preset, or 'plugins')."""
    return {
        "candidates": [(c.instance, c.feasible, c.total, c.rank, c.score_terms, c.weight_factor,
                        [v.model_dump() for v in c.violations]) for c in trace.candidates],
        "weights": weights(trace),
        "steps": [(s.seq, s.step, s.kind, s.plugin, s.value, s.rejected, s.instances,
                   None if s.kind == "score" else s.reason) for s in trace.decision_trace],
        "selected": (trace.selected_instance, trace.mode, trace.fallback_reason),
    }


DEFAULT_STATES = {
    "healthy": healthy(),
    "latched-out": healthy() | {"big-b": snap("big-b", kv=0.91, latches=[LatchState(constraint="kv-cache", out=True,
                                                                                     value=0.91)])},
    "suspect-and-stale": healthy() | {"big-b": snap("big-b", age=4.0), "small-a": snap("small-a", age=None)},
    "nothing-feasible": {i["id"]: snap(i["id"], kv=0.95) for i in FLEET},
}


@pytest.mark.parametrize("name", DEFAULT_STATES)
def test_the_default_sections_decide_like_their_explicit_plugins(name: str) -> None:
    state = DEFAULT_STATES[name]
    derived, explicit = make_config(), make_config(router={"plugins": DEFAULT_PLUGINS})
    for rid in ("r1", "r2", "r3"):
        ranked, a = decide(state, derived, request_id=rid)
        ranked_explicit, b = decide(state, explicit, request_id=rid)
        assert ranked == ranked_explicit and view(a) == view(b)


RICH = make_config(**RICH_SECTIONS)
RICH_STATES = {
    "idle": fleet_state(RICH),
    "loaded": fleet_state(RICH, a={"kv_cache_usage": 0.8, "latches": [LatchState(constraint="kv-cache", out=False)]},
                          c={"queue": 3, "running": 5}, e={"kv_cache_usage": 0.5, "error_rate": 0.1}),
    "filtered": fleet_state(RICH, a={"latches": [LatchState(constraint="kv-cache", out=True, value=0.9)]},
                            e={"error_rate": 0.4}, c={"age": 4.0, "queue": 2}),
    "stale": fleet_state(RICH, a={"age": None}, c={"age": 7.0}),
    "nothing-feasible": fleet_state(RICH, **{i: {"kv_cache_usage": 0.95} for i in "abcde"}),
}


@pytest.mark.parametrize("name", RICH_STATES)
def test_rich_sections_decide_like_their_explicit_plugins(name: str) -> None:
    explicit = RouteLensConfig.model_validate(RICH_EXPLICIT)
    for rid in (f"req-{n}" for n in range(6)):
        ranked, a = decide(RICH_STATES[name], RICH, request_id=rid, intent="chat")
        ranked_explicit, b = decide(RICH_STATES[name], explicit, request_id=rid, intent="chat")
        assert ranked == ranked_explicit and view(a) == view(b)


def test_the_rich_pipeline_is_what_the_sections_say() -> None:
    _, trace = decide(RICH_STATES["idle"], RICH, intent="chat")
    assert [(s.step, s.plugin) for s in trace.decision_trace if s.kind == "filter"] == [
        ("filter/freshness", "freshness/freshness-filter"),
        ("filter/context-window", "context-window/context-window-filter"),
        ("filter/zone", "zone/zone-filter"), ("filter/version", "version/version-filter"),
        ("filter/kv-cache", "kv-cache/constraint-filter"), ("filter/errors", "errors/constraint-filter"),
        ("filter/probe", "probe/probe-filter"), ("filter/breaker", "breaker/breaker-filter")]
    assert [(n, w) for n, w, _ in weights(trace)] == [("quality", 0.4), ("latency", 0.3), ("cost", 0.5),
                                                      ("balance", 0.1), ("mem", 0.2)]
    assert step(trace, "pick").plugin == "softmax/softmax-picker"
    assert sorted(c.instance for c in trace.candidates if c.feasible) == ["a", "c", "e"]


def test_with_router_plugins_the_sections_do_not_add_plugins() -> None:
    cfg = make_config(router={"zones": ["nowhere"], "picker": "p2c", "plugins": [{"type": "warmup-scorer",
                                                                                   "weight": 1.0}]})
    ranked, trace = decide(healthy(), cfg)
    assert len(ranked) == 3 and build_router(cfg).policy.constraints == []
    assert [s.step for s in trace.decision_trace] == ["analyse", "policy", "score/warmup", "pick"]
    assert step(trace, "score/warmup").reason == "weight 1 (plugins)"


def test_the_decay_cap_is_scoring_queue_norm_in_an_explicit_pipeline_too() -> None:
    # scoring.queue_norm is router-wide: the queue length suspect or missing gauges decay toward
    # (and the state view's cap), not the queue-depth scorer's own normaliser.
    plugins = RICH_PLUGINS + [{"type": "queue-depth-scorer", "weight": 0.3, "parameters": {"queue_norm": 8}}]
    state = RICH_STATES["filtered"]  # c is suspect: its queue of 2 decays toward the cap
    capped = RouteLensConfig.model_validate(COMMON | {"scoring": {"queue_norm": 8}, "router": {"plugins": plugins}})
    default = RouteLensConfig.model_validate(COMMON | {"router": {"plugins": plugins}})
    assert build_router(capped).policy.queue_norm == 8 and build_router(default).policy.queue_norm == 10
    _, a = decide(state, capped, intent="chat")
    _, b = decide(state, default, intent="chat")
    queue_at = [w.name for w in a.score_weights].index("queue")
    assert [c.score_terms[queue_at] for c in a.candidates if c.score_terms] != \
        [c.score_terms[queue_at] for c in b.candidates if c.score_terms]


def test_without_a_picker_the_max_score_picker_decides() -> None:
    cfg = make_config(router={"plugins": [{"type": "kv-cache-scorer", "weight": 1.0}]})
    picker = build_router(cfg).policy.picker
    assert (picker.TYPE, picker.name) == ("max-score-picker", "max")
    ranked, trace = decide(healthy(), cfg)
    assert ranked == ["big-b", "small-a", "big-a"]
    assert step(trace, "pick").plugin == "max/max-score-picker"


NIGHT = {"name": "night", "hours": [22, 6], "weights": {"quality": 2.0, "mem": 0.5}}


@pytest.mark.parametrize(("hour", "expected", "profile"), [
    (15, [("mem", 1.0)], "plugins"),
    (23, [("mem", 0.5), ("quality", 2.0)], "night"),
    (3, [("mem", 0.5), ("quality", 2.0)], "night"),
    (6, [("mem", 1.0)], "plugins"),
], ids=["day", "before-midnight", "after-midnight", "end-is-exclusive"])
def test_profiles_override_explicit_weights_by_scorer_name(hour: int, expected: list[tuple[str, float]],
                                                            profile: str) -> None:
    cfg = make_config(router={"plugins": [{"type": "kv-cache-scorer", "weight": 1.0},
                                          {"type": "quality-scorer", "weight": 0.0}]}, scoring={"profiles": [NIGHT]})
    _, trace = decide(healthy(), cfg, now=NOW.replace(hour=hour))
    assert [(n, w) for n, w, _ in weights(trace)] == expected
    assert step(trace, "score/mem").reason == f"weight {expected[0][1]:g} ({profile})"


def test_a_profile_weighs_a_derived_unweighted_scorer() -> None:
    cfg = make_config(scoring={"profiles": [{"name": "night", "hours": [22, 6], "weights": {"quality": 1.0}}]})
    _, trace = decide(healthy(), cfg, now=NOW.replace(hour=23))
    assert weights(trace)[-1] == ("quality", 1.0, "quality/quality-scorer")
    assert [n for n, _, _ in weights(trace)] == ["mem", "queue", "warmup", "error", "quality"]


def test_a_profile_does_not_reach_a_renamed_scorer() -> None:
    cfg = make_config(router={"plugins": [{"type": "kv-cache-scorer", "weight": 1.0},
                                          {"type": "quality-scorer", "name": "q", "weight": 0.0}]},
                      scoring={"profiles": [NIGHT]})
    _, trace = decide(healthy(), cfg, now=NOW.replace(hour=23))
    assert [(n, w) for n, w, _ in weights(trace)] == [("mem", 0.5)]


# Computed with the code before router.plugins existed (commit da39796~1 = 23790b8, identical policy_hash in
# 5a69920): `git archive 23790b8 router_core schemas | tar -x -C /tmp/old`, then with PYTHONPATH=/tmp/old
# `policy_hash(RouteLensConfig.model_validate(cfg))` for these two configurations.
OLD_HASHES = {"default": "sha256:b1795e6f51f8ac4d", "rich": "sha256:a652b58ff6408b90"}
HASHED = {
    "default": {"fleet": {"instances": FLEET}},
    "rich": {"fleet": {"instances": FLEET},
             "router": {"picker": "softmax", "softmax_temperature": 0.2, "zones": ["local"],
                        "min_versions": {"big": "2.0"}, "on_empty": "reject"},
             "constraints": [{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85,
                              "soft_threshold": 0.75}],
             "scoring": {"preset": "balanced", "weights": {"mem": 0.2}, "queue_norm": 8},
             "models": {"big": {"latency_ms": 900}}},
}


@pytest.mark.parametrize("name", HASHED)
def test_policy_hash_without_router_plugins_is_unchanged(name: str) -> None:
    raw = HASHED[name]
    assert policy_hash(RouteLensConfig.model_validate(raw)) == OLD_HASHES[name]
    with_null = raw | {"router": raw.get("router", {}) | {"plugins": None}}
    assert policy_hash(RouteLensConfig.model_validate(with_null)) == OLD_HASHES[name]
    assert build_router(RouteLensConfig.model_validate(raw)).policy.hash == OLD_HASHES[name]


def test_policy_hash_changes_with_router_plugins_and_not_with_the_version() -> None:
    base = policy_hash(make_config())
    assert policy_hash(make_config(router={"version": "routelens-9"})) == base
    assert policy_hash(make_config(router={"plugins": DEFAULT_PLUGINS})) != base
    assert policy_hash(make_config(router={"plugins": []})) != base
