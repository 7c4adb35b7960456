"""Flips of rule-routed requests are attributed to what changed: the rule's target, the fleet, the scoring.

Before, a rule-routed request was re-decided by ``Router.decide`` with no prepared candidates, so
every flip of one was counted as "old winner not in the new fleet", the fleet unchanged.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pytest

from app.experiments.replay_range import replay_range
from bench.replay_traces import fleet_config
from router_core import DecisionContext, QualityTable, Router, load_rules, route_of
from router_core.decide.builtin import builtin_registry
from router_core.decide.policy import build_policy
from router_core.decide.recorder import TraceRecorder
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.hashing import query_hash
from schemas.queries import TraceFilter
from schemas.trace import DecisionTrace, Outcome, RequestFeatures
from schemas.trace_inputs import DecisionInputs
from tests.app.experiments.seed import STATE_ONLY, T0, store_traces

DAY = T0 + timedelta(days=1)
N = 120
RULES = """
routing_matrix:
  - rule_name: long_context_priority
    condition: "input_length > 1000"
    primary_target: {target}
    fallback_chain: [deepseek-coder-6b-fp16]
"""


def _config(tmp_path: Path, target: str, **sections: object) -> RouteLensConfig:
    """Six instances (two per model, ``inst-0`` and ``inst-3`` serve deepseek-v4-32k) and one rule to ``target``."""
    path = tmp_path / f"rules-{target}.yaml"
    path.write_text(RULES.format(target=target), encoding="utf-8")
    data = fleet_config(6, scoring=STATE_ONLY).model_dump(mode="json", exclude_none=True)
    data["routing"] = {**data.get("routing", {}), "policy": str(path)}
    data.update(sections)
    return RouteLensConfig.model_validate(data)


def _rule_routed(config: RouteLensConfig, n: int, seed: int = 3) -> list[DecisionTrace]:
    """``n`` long requests for ``auto``, routed by the rule and decided by the real router."""
    assert config.routing.policy is not None
    policy = build_policy(config, builtin_registry())
    rules = load_rules(config.routing.policy, config)
    router, rng, out = Router(policy), random.Random(seed), []
    quality = dict(QualityTable(policy.models).snapshot())
    state: dict[str, InstanceSnapshot] = {}
    for i in range(n):
        ts = T0 + timedelta(seconds=i)
        if i % 8 == 0:  # a scrape round
            state = {s.id: InstanceSnapshot(instance=s.id, model=s.model, scraped_at=ts, engine="vllm",
                                            queue=float(rng.randint(0, 12)), running=float(rng.randint(0, 10)),
                                            kv_cache_usage=round(rng.random() * 0.9, 3), warmup_progress=1.0,
                                            error_rate=round(rng.random() / 20, 4),
                                            p50_latency_ms=round(rng.uniform(150, 1300), 1))
                     for s in policy.fleet}
        chars = rng.randint(6000, 20000)
        features = RequestFeatures(requested_model="auto", n_messages=1, input_chars=chars,
                                   est_input_tokens=chars // 4, analysed_chars=chars)
        rid = f"req_{i:06d}"
        route = route_of("long_context_priority", None, None, DecisionInputs(), rules, ts)
        rec = TraceRecorder(request_id=rid, ts=ts, router_version="routelens-test", policy_hash=policy.hash,
                            features=features, intent="chat", query_hash=query_hash(rid))
        rec.record_policy(route)
        ctx = DecisionContext(request_id=rid, features=features, intent="chat", now=ts, quality=quality,
                              route=route)
        decision = router.decide(ctx, state)
        rec.record_decision(decision)
        out.append(rec.finish(Outcome(status="ok", http_status=200, total_ms=100.0)))
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[DecisionTrace]]:
    tmp = tmp_path_factory.mktemp("rule-causes")
    traces = _rule_routed(_config(tmp, "deepseek-v4-32k"), N)
    assert {t.rule for t in traces} == {"long_context_priority"}
    return store_traces(tmp / "traces.duckdb", traces), traces


def test_the_same_policy_flips_nothing(stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, _ = stored
    report = replay_range(db, T0, DAY, TraceFilter(), _config(tmp_path, "deepseek-v4-32k"))
    assert (report.replayed, report.flips) == (N, 0)


def test_a_rule_targeting_another_model_is_the_rule_s_cause_not_the_fleet_s(
        stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, traces = stored
    on_v4 = sum(t.selected_model == "deepseek-v4-32k" for t in traces)
    assert on_v4 > N // 2
    report = replay_range(db, T0, DAY, TraceFilter(rule="long_context_priority"), _config(tmp_path, "qwen-72b"))
    assert report.replayed == N and report.flips >= on_v4
    assert {(c.kind, c.name): c.flips for c in report.causes} == {
        ("rule", "long_context_priority: target deepseek-v4-32k -> qwen-72b"): report.flips}


def test_an_instance_out_of_the_fleet_is_the_fleet_s_cause(
        stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, traces = stored
    config = _config(tmp_path, "deepseek-v4-32k")
    fleet = config.fleet.model_dump(mode="json", exclude_none=True)
    fleet["instances"] = [s for s in fleet["instances"] if s["id"] != "inst-0"]
    on_inst0 = sum(t.selected_instance == "inst-0" for t in traces)
    assert on_inst0 > 0
    report = replay_range(db, T0, DAY, TraceFilter(), _config(tmp_path, "deepseek-v4-32k", fleet=fleet))
    assert report.flips == on_inst0
    assert {(c.kind, c.name): c.flips for c in report.causes} == {("fleet", "inst-0 not in the new fleet"): on_inst0}


def test_other_scoring_over_the_same_fleet_flips_on_terms_or_filters(
        stored: tuple[Path, list[DecisionTrace]], tmp_path: Path) -> None:
    db, _ = stored
    balanced = _config(tmp_path, "deepseek-v4-32k", scoring={"preset": "balanced"})
    report = replay_range(db, T0, DAY, TraceFilter(), balanced)
    assert report.flips > 0
    assert {c.kind for c in report.causes} <= {"term", "filter"}, report.causes
