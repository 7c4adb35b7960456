"""Re-deciding a stored trace under its own policy gives the same decision, on every decision path.

The decision goes through the trace's JSON (what storage keeps), the policy through its stored
document (``router_core.decide.policy_doc``); :func:`first_difference` compares rule, weights,
steps, every candidate's verdicts and terms, and the picker's probability.
"""

from __future__ import annotations

from datetime import timedelta
from itertools import count
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.policy_doc import canonical, from_document, policy_document
from router_core.decide.recorder import TraceRecorder
from router_core.decide.replay import NotReplayable, redecide, replay
from router_core.decide.verify import first_difference
from router_core.framework import Blocked
from router_core.resilience.budgets import BudgetView
from router_core.resilience.router_modes import ModeChoice
from router_core.rules.load import compile_policy
from router_core.rules.route import RouteChoice
from router_core.state.quality import QualitySnapshot, QualityTable
from schemas import LatchState, OutcomeStatus, RoutingMode
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace, Outcome
from tests.router_core.conftest import FLEET, NOW, features, healthy, make_config, snap
from tests.router_core.decide.test_router_rules import POLICY, route

FLEET_KV = [{**i, "kv_cache_bytes": "16GB"} for i in FLEET]


def live(config: RouteLensConfig, state: Any, ctx: DecisionContext) -> DecisionTrace:
    """Decide as the gateway does and return the trace as storage gives it back."""
    ticks = count()
    router = build_router(config, perf=lambda: next(ticks) * 1e-6)
    rec = TraceRecorder(request_id=ctx.request_id, ts=ctx.now, router_version="t", policy_hash=router.policy.hash,
                        query_hash="sha256:" + "0" * 64, features=ctx.features, intent=ctx.intent)
    rec.record_policy(ctx.route)
    rec.record_decision(router.decide(ctx, state))
    trace = rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0))
    return DecisionTrace.model_validate_json(trace.model_dump_json())


def stored(config: RouteLensConfig, rules: Any) -> tuple[Any, Any]:
    """The policy as a replay gets it back from its stored document."""
    cfg, got = from_document(canonical(policy_document(config, rules)))
    return build_router(cfg).policy, got


def test_a_rule_routed_trace_replays_to_the_rule_not_auto() -> None:
    # The reproduction of issue 31: rule to-small sent it to small-a; replayed, it went to big-b (rule auto).
    config = make_config(fleet={"instances": FLEET_KV}, routing={"policy": "p.yaml"})
    rules = compile_policy(POLICY, "p.yaml", config)
    ctx = DecisionContext(request_id="r1", features=features(tokens=2000), intent="chat", now=NOW,
                          quality=QualityTable(config.models).snapshot(), route=route(tokens=2000))
    trace = live(config, healthy(), ctx)
    assert trace.rule == "to-small" and trace.selected_instance == "small-a"
    policy, again = stored(config, rules)
    decision = redecide(trace, policy, again)
    assert decision.rule == "to-small" and decision.selected is not None and decision.selected.id == "small-a"
    assert first_difference(trace, decision) is None
    # without its rule set the rule cannot be re-decided: said, not guessed as "auto"
    with pytest.raises(NotReplayable, match="rule"):
        redecide(trace, policy, None)


def test_a_difference_is_named_at_its_first_step() -> None:
    config = make_config()
    ctx = DecisionContext(request_id="r2", features=features(), intent="chat", now=NOW,
                          quality=QualityTable(config.models).snapshot())
    trace = live(config, healthy(), ctx)
    stricter = make_config(constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.25}])
    diff = first_difference(trace, redecide(trace, build_router(stricter).policy))
    assert diff is not None and diff.step.startswith("step ") and "filter/kv-cache" in diff.step
    assert replay(trace, config).selected_instance == trace.selected_instance


def test_an_instance_flagged_divergent_replays_with_its_own_quality() -> None:
    # Seen in the demo: feedback flagged big-a worse than its sibling for "chat", so the two instances of one
    # model scored different quality terms; keyed by model, the replay gave both the same one and picked again.
    config = make_config(scoring={"preset": "balanced"})
    models = QualityTable(config.models).snapshot()
    learned = QualitySnapshot(dict(models), {("big-a", "chat"): 0.2}, frozenset({("big-a", "chat")}))
    ctx = DecisionContext(request_id="r3", features=features(), intent="chat", now=NOW, quality=learned)
    trace = live(config, healthy(), ctx)
    at = [w.name for w in trace.score_weights].index("quality")
    terms = {c.instance: c.score_terms[at] for c in trace.candidates if c.score_terms}
    assert terms["big-a"] == 0.2 and terms["big-b"] != 0.2
    diff = first_difference(trace, redecide(trace, build_router(config).policy))
    assert diff is None, f"{diff.step}: live {diff.live!r}, replayed {diff.replayed!r}"


# -- every path, generated ------------------------------------------------------------------------

PICKERS = st.sampled_from(["max", "p2c", "softmax"])
PRESETS = st.sampled_from(["balanced", "seed-instance-score"])


@st.composite
def situations(draw: st.DrawFn) -> tuple[RouteLensConfig, Any, Any, DecisionContext]:
    picker, preset = draw(PICKERS), draw(PRESETS)
    threshold = draw(st.sampled_from([0.5, 0.85, 0.95]))
    config = make_config(fleet={"instances": FLEET_KV}, routing={"policy": "p.yaml"},
                         router={"picker": picker}, scoring={"preset": preset},
                         constraints=[{"name": "kv-cache", "metric": "kv_cache_usage", "threshold": threshold}])
    rules = compile_policy(POLICY, "p.yaml", config)
    state = {}
    for spec in FLEET:
        kv = draw(st.one_of(st.none(), st.floats(0, 1, allow_nan=False)))
        out = draw(st.booleans()) and kv is not None
        state[spec["id"]] = snap(spec["id"], kv=kv, queue=draw(st.integers(0, 12)),
                                 age=draw(st.sampled_from([None, 0.5, 4.0, 120.0])),
                                 latches=[LatchState(constraint="kv-cache", out=True, value=kv)] if out else None)
    hour = draw(st.integers(0, 23))
    now = NOW.replace(hour=hour) + timedelta(seconds=draw(st.integers(0, 3599)))
    model = draw(st.sampled_from(["auto", "auto", "big", "small"]))
    prompt = draw(st.sampled_from(["", "roomy", "slots", "costly"]))
    tokens = draw(st.sampled_from([50, 2000, 9000]))
    choice = route(prompt, tokens=tokens, hour=hour, skip_primary=draw(st.booleans()))
    routed: RouteChoice | None = draw(st.sampled_from([None, choice]))
    mode = draw(st.sampled_from([None, "static", "safe"]))
    mc = None if mode is None else (
        ModeChoice(RoutingMode.STATIC, seq=draw(st.integers(0, 50)), weights={"big": 3, "small": 1},
                   reason="static") if mode == "static"
        else ModeChoice(RoutingMode.SAFE, safe_model="big", reason="safe"))
    use = draw(st.floats(0, 1.2, allow_nan=False))
    budget = draw(st.sampled_from([None, BudgetView(band="day", use=use, cost_factor=1 + use, governs_all=False,
                                                    stopped=frozenset({"big"}) if use >= 1 else frozenset(),
                                                    reason="band day")]))
    blocked = draw(st.sampled_from([None, {"big-a": Blocked("instance", 2, "instance breaker big-a open: 5xx")}]))
    ctx = DecisionContext(request_id=f"r{draw(st.integers(0, 10_000))}",
                          features=features(model, tokens=tokens, max_tokens=draw(st.sampled_from([None, 4000]))),
                          intent=draw(st.sampled_from([None, "chat", "code"])), now=now,
                          quality=QualityTable(config.models).snapshot(), blocked=blocked, route=routed, mode=mc,
                          affinity=draw(st.sampled_from([None, "big-b", "small-a"])), budget=budget)
    return config, rules, state, ctx


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situations())
def test_every_decision_path_replays_exactly(situation: tuple[RouteLensConfig, Any, Any, DecisionContext]) -> None:
    config, rules, state, ctx = situation
    try:
        trace = live(config, state, ctx)
    except Exception as exc:  # a model the fleet lacks is refused before any trace: nothing to replay
        assert type(exc).__name__ == "UnknownModel", exc
        return
    policy, again = stored(config, rules)
    diff = first_difference(trace, redecide(trace, policy, again))
    assert diff is None, f"{diff.step}: live {diff.live!r}, replayed {diff.replayed!r}"
