import asyncio
from datetime import UTC, datetime

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.resilience.budgets import BudgetTracker, cost_factor
from router_core.shared.base import MemoryShared
from router_core.state.quality import QualityTable
from schemas.config import RouteLensConfig
from schemas.config.economics import BudgetSettings
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model
from tests.router_core.conftest import NOW, features, healthy, make_config

PEAK = NOW  # 15:00 UTC: the peak band
NIGHT = datetime(2026, 11, 30, 22, 0, tzinfo=UTC)
BANDS = BudgetSettings(bands=[
    {"name": "peak", "hours": [[9, 18]], "models": ["big"], "max_share": 0.05, "min_calls": 100},
    {"name": "off-peak", "hours": [[0, 24]], "models": ["big"], "max_share": 0.10, "min_calls": 100},
])


async def _tracker() -> BudgetTracker:
    return BudgetTracker(BANDS, MemoryShared(clock=lambda: 0.0))


def test_the_cost_factor_rises_monotonically_and_continuously() -> None:
    xs = [i / 100 for i in range(0, 121)]
    fs = [cost_factor(x, 0.5, 4.0) for x in xs]
    assert all(b >= a for a, b in zip(fs, fs[1:], strict=False))
    assert fs[0] == fs[50] == 1.0 and fs[100] == 4.0 == fs[120]
    assert max(b - a for a, b in zip(fs, fs[1:], strict=False)) < 0.07  # no jump


def test_spend_approaching_the_budget_raises_the_cost_weight_and_stops_at_it() -> None:
    async def run() -> None:
        t = await _tracker()
        for _ in range(95):
            t.record("small", 1.0, PEAK)
        factors, stopped = [], []
        for _ in range(6):  # 5% of max(calls, 100) = 5 calls to big in the peak band
            v = t.view(PEAK)
            factors.append(v.cost_factor)
            stopped.append(v.is_stopped("big"))
            t.record("big", 1.8, PEAK)
        assert factors == sorted(factors) and factors[0] < factors[-1]
        assert stopped == [False] * 5 + [True]
        assert not t.view(PEAK).is_stopped("small")
        assert t.view(NIGHT).band == "off-peak" and not t.view(NIGHT).is_stopped("big")  # a band of its own
        await asyncio.sleep(0)
        rows = {r["band"]: r for r in t.state(PEAK)}
        assert rows["peak"]["governed_calls"] == 6 and rows["peak"]["stopped"] and rows["peak"]["active"]

    asyncio.run(run())


def test_the_router_scales_the_cost_weight_and_stops_the_expensive_model() -> None:
    async def run() -> None:
        cfg = make_config(scoring={"weights": {"cost": 1.0, "mem": 0.1}})
        router, t = build_router(cfg), await _tracker()
        for _ in range(80):
            t.record("small", 1.0, PEAK)
        ctx = DecisionContext(request_id="r", features=features(), intent=None, now=PEAK,
                              quality=QualityTable({}).snapshot(), budget=t.view(PEAK))
        d = router.decide(ctx, healthy())
        assert {w["name"]: w["weight"] for w in d.weights}["cost"] == pytest.approx(1.0)
        for _ in range(4):
            t.record("big", 1.8, PEAK)
        v = t.view(PEAK)
        assert 1.0 < v.cost_factor < 4.0
        d = router.decide(DecisionContext(**{**_fields(ctx), "budget": v}), healthy())
        assert {w["name"]: w["weight"] for w in d.weights}["cost"] == pytest.approx(v.cost_factor)
        assert any(s["step"] == "budget" for s in d.steps)
        t.record("big", 1.8, PEAK)
        d = router.decide(DecisionContext(**{**_fields(ctx), "budget": t.view(PEAK)}), healthy())
        assert [s.model for s in d.targets] == ["small"]
        big = next(c for c in d.candidates if c["instance"] == "big-a")
        assert not big["feasible"] and big["violations"][0].constraint == "budget"

    asyncio.run(run())


def _fields(ctx: DecisionContext) -> dict[str, object]:
    return {f: getattr(ctx, f) for f in DecisionContext.__dataclass_fields__}


def test_refresh_reads_other_replicas_spend() -> None:
    async def run() -> None:
        shared = MemoryShared(clock=lambda: 0.0)
        a, b = BudgetTracker(BANDS, shared), BudgetTracker(BANDS, shared)
        for _ in range(5):
            a.record("big", 1.8, PEAK)
        await asyncio.sleep(0)
        assert not b.view(PEAK).is_stopped("big")
        await b.refresh(PEAK)
        assert b.view(PEAK).is_stopped("big")

    asyncio.run(run())


GOOD = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:1'}\neconomics:\n  budgets:\n    bands:\n"


@pytest.mark.parametrize(("band", "message"), [
    ("{name: p, hours: [[9, 18]], max_share: 1.5}", "less than or equal to 1"),
    ("{name: p, hours: [[9, 25]], max_share: 0.1}", "never applies"),
    ("{name: p, hours: [[9, 18]], max_share: 0.1, max_spend: 5}", "exactly one of max_share and max_spend"),
])
def test_a_bad_budget_fails_at_load_with_file_line_and_field(band: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, GOOD + f"      - {band}\n", "b.yaml")
    assert "b.yaml:7: economics.budgets.bands[0]" in str(info.value) and message in str(info.value), str(info.value)
