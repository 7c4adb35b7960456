"""Router.rank and Router.pick are decide()'s plain path without its record: the same choice, terms and verdicts."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.resilience.router_modes import ModeChoice
from router_core.state.quality import QualityTable
from schemas import RoutingMode
from tests.router_core.conftest import FLEET, NOW, features, make_config, snap

CONSTRAINTS = [{"name": "kv", "metric": "kv_cache_usage", "op": "<=", "threshold": 0.8, "exit_for": 0},
               {"name": "queue", "metric": "queue", "op": "<=", "threshold": 6, "exit_for": 0}]


def _state(rng: random.Random, shift: timedelta) -> dict:
    """Snapshots as of ``NOW + shift``: some loaded, some stale or never scraped."""
    out = {}
    for i in FLEET:
        s = snap(i["id"], kv=rng.choice([None, *[rng.random() for _ in range(6)]]), queue=rng.choice([0, 2, 5, 9]),
                 age=rng.choice([None, 30.0, *[0.5] * 10]))
        out[i["id"]] = s if s.scraped_at is None else s.model_copy(update={"scraped_at": s.scraped_at + shift})
    return out


@pytest.mark.parametrize("picker", ["max", "softmax", "p2c"])
@pytest.mark.parametrize("model", ["auto", "big", "small"])
def test_rank_and_pick_choose_what_decide_chooses(picker: str, model: str) -> None:
    night = {"name": "night", "hours": [0, 6], "weights": {"quality": 0.7, "cost": 0.3}}  # the weights read the hour
    cfg = make_config(constraints=CONSTRAINTS, router={"picker": picker, "on_empty": "fail_open"},
                      scoring={"profiles": [night]})
    router = build_router(cfg)
    rng = random.Random(f"{picker}/{model}")
    fast = slow = 0
    for n in range(300):
        shift = timedelta(hours=rng.randrange(24))  # the weights in force read the hour
        ctx = DecisionContext(request_id=f"r{n}", features=features(model), intent="chat", now=NOW + shift,
                              quality=QualityTable(cfg.models).snapshot())
        state = _state(rng, shift)
        decision = router.decide(ctx, state)
        ranked = router.rank(ctx, state)
        assert ranked is not None and ranked.rule == decision.rule
        if not ranked.scored:  # nothing feasible: decide's fallbacks
            slow += 1
            assert decision.fallback_reason is not None
            continue
        fast += 1
        assert router.pick(ctx.request_id, ranked.scored) == decision.targets[0].id
        weights = [w["name"] for w in decision.weights]
        assert list(ranked.weights) == weights
        by_id = {c["instance"]: c for c in decision.candidates}
        for k, iid in enumerate(ranked.ids):
            assert [col[k] for col in ranked.columns] == by_id[iid]["score_terms"]
            assert dict(ranked.scored)[iid] == by_id[iid]["total"]
        gone = {c["instance"] for c in decision.candidates if not c["feasible"]}
        assert set(ranked.removed) == gone
        assert all(ranked.removed[i] == next(v.constraint for v in by_id[i]["violations"] if v.severity == "hard")
                   for i in gone)
    assert fast > 50 and slow > 5  # both paths were exercised


def test_rank_leaves_the_other_paths_to_decide() -> None:
    cfg = make_config()
    router = build_router(cfg)
    ctx = DecisionContext(request_id="r", features=features(), intent="chat", now=NOW,
                          quality=QualityTable(cfg.models).snapshot(), mode=ModeChoice(RoutingMode.STATIC))
    assert router.rank(ctx, {i["id"]: snap(i["id"]) for i in FLEET}) is None
