"""A budget estimated while the shared state is down, through a real gateway: the state route and the trace say so."""

from __future__ import annotations

import asyncio

from tests.router_core.gateway.test_modes_gateway import _chat, _state, gateway
from tests.router_core.resilience.test_budget_outage import Redis, Worker


def test_a_budget_estimated_while_redis_is_down_stops_the_model_and_says_so() -> None:
    async def run() -> None:
        fleet = {"a": {"model": "big", "cost": {"base": 2.0}}, "b": {"model": "small", "cost": {"base": 1.0}}}
        econ = {"budgets": {"bands": [{"name": "all-day", "hours": [[0, 24]], "models": ["big"], "max_spend": 4.0}]}}
        async with gateway(fleet, econ) as (client, hooks, gw):
            redis = Redis([0.0])
            redis.up = False
            gw.budgets.shared = Worker(redis, 2, [0.0])  # one of two workers, Redis down
            gw.budgets.record("big", 1.0, gw.wall())
            gw.budgets.record("big", 1.0, gw.wall())  # 2 here: 4 for the two workers, the budget
            _, _, trace = await _chat(client, hooks)
            assert trace.selected_model == "small"
            a = next(c for c in trace.candidates if c.instance == "a")
            assert not a.feasible and a.violations[0].constraint == "budget"
            assert "estimated" in a.violations[0].reason and "estimated" in trace.inputs.budget.reason
            (row,) = (await _state(client))["budgets"]
            assert row["estimated"] is True and row["stopped"] and row["spend"] == 4.0

    asyncio.run(run())
