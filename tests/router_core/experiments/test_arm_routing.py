"""An arm with a routing file of its own: its requests match its rules, and each trace replays under its own policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from app.experiments.verify import PolicyShelf, verify_trace
from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hello there, route me"}]}
RULES_Y = """
routing_matrix:
  - rule_name: all-to-small
    condition: "input_length > 0"
    primary_target: small
"""


ARMS = """
  arms:
    - {name: x, router_version: v-x, share: 0.5}
    - {name: y, router_version: v-y, share: 0.5, policy: {routing: {policy: rules_y.yaml}}}
"""
SHADOWED = """
  arms:
    - {name: x, router_version: v-x, share: 1.0}
  shadow: {router_version: v-s, sample: 1.0, policy: {routing: {policy: rules_y.yaml}}}
"""


async def serve(tmp_path: Path, users: list[str], arms: str = ARMS,
                ) -> tuple[list[tuple[str, str]], MemoryHooks, Gateway]:
    servers = {"big-a": TestServer(upstream(reply(200), 0.1)), "small-a": TestServer(upstream(reply(200), 0.5))}
    for server in servers.values():
        await server.start_server()
    urls = {iid: str(s.make_url("")).rstrip("/") for iid, s in servers.items()}
    (tmp_path / "rules_y.yaml").write_text(RULES_Y)
    (tmp_path / "routelens.yaml").write_text(f"""
fleet:
  instances:
    - {{id: big-a, model: big, url: "{urls['big-a']}"}}
    - {{id: small-a, model: small, url: "{urls['small-a']}"}}
scrape: {{interval_s: 60}}
experiments:
  key: header:x-user-id{arms}""")
    config = read_config(tmp_path / "routelens.yaml")
    hooks = MemoryHooks()
    gateway = Gateway(config, build_router(config), hooks)
    out = []
    async with TestClient(TestServer(gateway.build_app())) as client:
        for user in users:
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"x-user-id": user})
            assert resp.status == 200, await resp.text()
            out.append((user, resp.headers["x-request-id"]))
        for _ in range(3):
            await asyncio.sleep(0)
    for server in servers.values():
        await server.close()
    return out, hooks, gateway


def test_an_arm_routes_by_its_own_rules_and_every_trace_replays_under_its_own_policy(tmp_path: Path) -> None:
    out, hooks, gw = asyncio.run(serve(tmp_path, [f"u{i}" for i in range(30)]))
    traces = [hooks.traces[rid] for _, rid in out]
    by_arm: dict[str | None, list[Any]] = {}
    for t in traces:
        by_arm.setdefault(t.experiment_arm, []).append(t)
    assert set(by_arm) == {"x", "y"}
    # arm y's rule sends everything to the small model; arm x has no rules: the best instance (big-a, less loaded)
    assert {(t.rule, t.selected_instance) for t in by_arm["y"]} == {("all-to-small", "small-a")}
    assert {t.rule for t in by_arm["x"]} == {"auto"} and all(t.policy is None for t in by_arm["x"])
    hashes = {arm: {t.policy_hash for t in ts} for arm, ts in by_arm.items()}
    assert len(hashes["x"]) == len(hashes["y"]) == 1 and hashes["x"] != hashes["y"]
    assert set(hooks.policies) == hashes["x"] | hashes["y"]
    shelf = PolicyShelf(hooks.policies.get)
    assert [verify_trace(t, shelf) for t in traces] == [None] * len(traces)


def test_a_shadow_with_its_own_rules_decides_on_its_own_route(tmp_path: Path) -> None:
    out, hooks, _ = asyncio.run(serve(tmp_path, [f"u{i}" for i in range(10)], SHADOWED))
    traces = [hooks.traces[rid] for _, rid in out]
    assert {(t.rule, t.selected_instance) for t in traces} == {("auto", "big-a")}  # live: no rules
    shadows = [t.shadow for t in traces]
    assert all(s is not None and s.selected_instance == "small-a" and s.flipped for s in shadows)
    hashes = {s.policy_hash for s in shadows if s is not None}
    assert len(hashes) == 1 and hashes <= set(hooks.policies)  # the shadow's policy, its rules in, stored
    assert hashes != {t.policy_hash for t in traces}
