"""One ``routing.peak_hours``, one zone: a rule's ``cost_params`` surge and the instances' surge prices agree.

The policy file reads its conditions in its own ``timezone:`` (Asia/Shanghai here); the peak hours
are ``routing.timezone``'s (UTC here) for both premiums. Decided through a real gateway at 10:00
UTC (a peak hour: both surges) and 02:00 UTC (10:00 in Shanghai: neither), each trace re-decided
under its own stored policy gives the same decision.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.decide.policy_doc import from_document
from router_core.decide.replay import redecide
from router_core.decide.verify import first_difference
from router_core.gateway import Gateway
from schemas.trace import DecisionTrace
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

RULES = """timezone: Asia/Shanghai
routing_matrix:
  - rule_name: all
    condition: "input_length >= 0"
    primary_target: big
    cost_params: {base_weight: 1.0, surge_multiplier: 5.0}
"""
PEAK, NIGHT = datetime(2026, 6, 3, 10, 0, tzinfo=UTC), datetime(2026, 6, 3, 2, 0, tzinfo=UTC)


async def _decide(tmp: Path, times: list[datetime]) -> tuple[list[DecisionTrace], MemoryHooks]:
    now = [times[0]]
    up = TestServer(upstream(reply(200), 0.2))
    await up.start_server()
    (tmp / "rules.yaml").write_text(RULES)
    (tmp / "routelens.yaml").write_text(f"""
fleet:
  instances:
    - {{id: big-a, model: big, url: "{str(up.make_url('')).rstrip('/')}", cost: {{base: 1.0, surge_multiplier: 3.0}}}}
scrape: {{interval_s: 60}}
routing: {{policy: rules.yaml, timezone: UTC, peak_hours: [[9, 12]]}}
scoring: {{preset: balanced}}
""")
    config = read_config(tmp / "routelens.yaml")
    hooks = MemoryHooks()
    gw = Gateway(config, build_router(config), hooks, wall=lambda: now[0])
    ids = []
    try:
        async with TestClient(TestServer(gw.build_app())) as client:
            for t in times:
                now[0] = t
                body = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}
                resp = await client.post("/v1/chat/completions", json=body)
                await resp.read()
                assert resp.status == 200
                ids.append(resp.headers["x-request-id"])
            for _ in range(3):
                await asyncio.sleep(0)
    finally:
        await up.close()
    return [hooks.traces[i] for i in ids], hooks


def test_both_peak_premiums_read_routing_peak_hours_in_routing_timezone(tmp_path: Path) -> None:
    (peak, night), _ = asyncio.run(_decide(tmp_path, [PEAK, NIGHT]))
    assert peak.inputs is not None and peak.inputs.local_hour == 18  # the rules' own zone: 18:00 in Shanghai
    assert night.inputs is not None and night.inputs.local_hour == 10
    weight = {t.request_id: {w.name: w.weight for w in t.score_weights}["cost"] for t in (peak, night)}
    assert (peak.outcome.cost, night.outcome.cost) == (pytest.approx(3.0), pytest.approx(1.0))  # instance surge
    assert weight[peak.request_id] == pytest.approx(5.0 * weight[night.request_id])  # the rule's surge, same hours


def test_each_trace_replays_to_the_same_decision_under_its_own_policy(tmp_path: Path) -> None:
    traces, hooks = asyncio.run(_decide(tmp_path, [PEAK, NIGHT]))
    for trace in traces:
        stored = DecisionTrace.model_validate_json(trace.model_dump_json())
        cfg, rules = from_document(hooks.policies[stored.policy_hash].document)
        decision = redecide(stored, build_router(cfg).policy, rules)
        assert first_difference(stored, decision) is None, trace.ts
