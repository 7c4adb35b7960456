"""A stored policy record carries the version of the router that decides with it: each arm's, the shadow's.

An audit found ``GET /v1/policies/<hash>`` of an arm's policy saying the base router's version
(``routelens-0.1.0``) while that arm's traces said ``routelens-0.1.0-seed``: every record was
stamped with the base router's version.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.router_core.gateway.gateway_kit import CHAT, served_gateway
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply

WEIGHTS_X = {"scoring": {"preset": "balanced", "weights": {"quality": 0.1, "latency": 0.6, "cost": 0.2,
                                                           "balance": 0.1}}}
WEIGHTS_Y = {"scoring": {"preset": "balanced", "weights": {"quality": 0.3, "latency": 0.2, "cost": 0.4,
                                                           "balance": 0.1}}}
EXPERIMENTS: dict[str, Any] = {
    "key": "header:x-user-id",
    "arms": [{"name": "x", "router_version": "v-x", "share": 0.5, "policy": WEIGHTS_X},
             {"name": "y", "router_version": "v-y", "share": 0.5, "policy": WEIGHTS_Y}],
    "shadow": {"router_version": "v-rc", "sample": 1.0, "policy": {"scoring": {"preset": "balanced", "weights": {
        "quality": 0.25, "latency": 0.25, "cost": 0.25, "balance": 0.25}}}},
}


async def _serve() -> tuple[list[str], MemoryHooks]:
    rids = []
    sections = {"router": {"version": "v-base"}, "experiments": EXPERIMENTS}
    async with served_gateway({iid: reply(200) for iid in ("a", "b")}, sections=sections) as (client, hooks, _):
        for arm in ("x", "y", "x", "y"):
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"x-routelens-arm": arm})
            assert resp.status == 200, await resp.text()
            rids.append(resp.headers["x-request-id"])
        refused = await client.post("/v1/chat/completions", data=b"{not json",
                                    headers={"content-type": "application/json"})
        assert refused.status == 400  # traced under the base router's policy
        rids.append(refused.headers["x-request-id"])
        for _ in range(5):
            await asyncio.sleep(0)  # shadowed traces are emitted just after their response
    return rids, hooks


def test_each_arms_policy_record_carries_that_arms_version_and_the_shadows_its_own() -> None:
    rids, hooks = asyncio.run(_serve())
    traces = [hooks.traces[r] for r in rids]
    assert [t.experiment_arm for t in traces] == ["x", "y", "x", "y", None]
    for t in traces:
        record = hooks.policies[t.policy_hash]
        assert (record.router_version, record.arm) == (t.router_version, t.experiment_arm), t.request_id
    assert {t.router_version for t in traces} == {"v-x", "v-y", "v-base"}
    shadows = {t.shadow.policy_hash for t in traces if t.shadow is not None}
    assert len(shadows) == 1, shadows
    (shadow_hash,) = shadows
    assert shadow_hash not in {t.policy_hash for t in traces}
    assert hooks.policies[shadow_hash].router_version == "v-rc"
    assert hooks.policies[shadow_hash].arm is None
