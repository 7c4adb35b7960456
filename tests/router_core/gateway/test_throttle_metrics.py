"""A rule's throttle in ``/metrics``: what it did with each request it did not admit at once, and how long they queued.

``routelens_rule_throttle_requests_total{rule,action}`` and ``routelens_rule_throttle_wait_seconds{rule}``
(router_core.metrics.throttles), counted by the policy gate that admitted the request: the
gateway's own, and an experiment arm's (built with the experiment, and again on every reload).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry, generate_latest

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.gateway.policy_gate import PolicyGate
from router_core.metrics import GatewayMetrics, merge_workers
from router_core.rules.ir import Match
from router_core.rules.load import compile_policy, load_policy
from router_core.rules.route import RouteChoice
from schemas.config import RouteLensConfig
from tests.promtext import Samples, samples
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

THROTTLED = "routelens_rule_throttle_requests_total"
WAIT = "routelens_rule_throttle_wait_seconds"
CONFIG = RouteLensConfig.model_validate({"fleet": {"instances": [
    {"id": "a", "model": "m", "url": "http://127.0.0.1:1"}, {"id": "b", "model": "n", "url": "http://127.0.0.1:2"}]}})
# One token (10 a second, a 100 ms burst) per rule; "queued" would wait 100 ms for the next, past its max_wait.
POLICY = """routing_matrix:
  - {rule_name: chained, primary_target: n, fallback_chain: [m],
     throttle_config: {max_rps: 10, burst_window: 100ms, overflow: chain}}
  - {rule_name: refused, primary_target: n, throttle_config: {max_rps: 10, burst_window: 100ms, overflow: reject}}
  - {rule_name: queued, primary_target: n,
     throttle_config: {max_rps: 10, burst_window: 100ms, overflow: wait, max_wait: 50ms}}
  - {rule_name: free, primary_target: n}
"""


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def gate_of(policy: str, clock: Clock | None = None) -> tuple[PolicyGate, CollectorRegistry]:
    """A policy gate counting its throttles in a fresh registry (``clock``: the throttles'; None: real time)."""
    gate = PolicyGate(CONFIG, compile_policy(policy, "policy.yaml", CONFIG), clock=clock or time.monotonic)
    registry = CollectorRegistry()
    gate.count_throttles(GatewayMetrics(registry).throttles)
    return gate, registry


def admit(gate: PolicyGate, names: list[str]) -> list[str | None]:
    """Each request of a rule named in ``names``, in turn, through the gate's throttle: what it did."""
    rules = gate.rules
    assert rules is not None
    by_name = {r.name: r for r in rules.rules}

    async def run() -> list[str | None]:
        out = []
        for name in names:
            route, adm = await gate.admit(RouteChoice(rules, Match(by_name[name], ()), local_hour=0))
            assert route is not None and route.throttled == adm.action
            out.append(adm.action)
        return out

    return asyncio.run(run())


def scraped(registry: CollectorRegistry) -> Samples:
    return samples(generate_latest(registry).decode())


def test_each_request_a_throttled_rule_matched_is_counted_by_rule_and_action() -> None:
    gate, registry = gate_of(POLICY, Clock())
    got = scraped(registry)  # before any request: every throttled rule's series, at 0
    assert {(dict(k)["rule"], dict(k)["action"]) for n, k in got if n == THROTTLED} == {
        ("chained", "admitted"), ("chained", "chain"), ("chained", "reject"), ("refused", "admitted"),
        ("refused", "reject"),
        ("queued", "admitted"), ("queued", "wait"), ("queued", "reject")}
    assert all(v == 0 for (n, _), v in got.items() if n.startswith("routelens_rule_") and not n.endswith("_created"))
    assert got.value(WAIT + "_count", rule="queued") == 0
    actions = admit(gate, ["chained", "refused", "queued", "free"] * 3)
    assert actions == [None, None, None, None] + ["chain", "reject", "reject", None] * 2
    got = scraped(registry)
    assert [got.value(THROTTLED, rule=r, action="admitted") for r in ("chained", "refused", "queued")] == [1, 1, 1]
    assert got.value(THROTTLED, rule="chained", action="chain") == 2
    assert got.value(THROTTLED, rule="refused", action="reject") == 2
    assert got.value(THROTTLED, rule="queued", action="reject") == 2  # the next token was past its max_wait...
    assert got.value(THROTTLED, rule="queued", action="wait") == 0
    assert got.value(WAIT + "_count", rule="queued") == 0  # ...so it did not queue: no wait observed
    assert not [k for n, k in got if n.startswith("routelens_rule_") and ("rule", "free") in k]  # no throttle


def test_a_wait_is_observed_whether_a_token_came_or_max_wait_ran_out() -> None:
    # real time (the loop's timers hand the tokens): 20 tokens a second, one at a time; waits of up to 80 ms
    gate, registry = gate_of("routing_matrix:\n  - {rule_name: queued, primary_target: n, throttle_config: "
                             "{max_rps: 20, burst_window: 50ms, overflow: wait, max_wait: 80ms}}\n")
    assert gate.rules is not None
    choice = RouteChoice(gate.rules, Match(gate.rules.rules[0], ()), local_hour=0)

    async def three_at_once() -> list[tuple[str | None, float | None]]:
        got = await asyncio.gather(*(gate.admit(choice) for _ in range(3)))
        return [(adm.action, adm.waited_s) for _, adm in got]

    by = dict(asyncio.run(three_at_once()))  # one token at once, the next in 50 ms, the third's past 80 ms
    assert set(by) == {None, "wait", "reject"}
    came, ran_out = by["wait"], by["reject"]
    assert came is not None and ran_out is not None and 0 < came < ran_out
    got = scraped(registry)
    assert got.value(THROTTLED, rule="queued", action="wait") == 1
    assert got.value(THROTTLED, rule="queued", action="reject") == 1  # max_wait ran out: refused
    assert got.value(WAIT + "_count", rule="queued") == 2
    assert got.value(WAIT + "_sum", rule="queued") == pytest.approx(came + ran_out)
    assert got.value(WAIT + "_bucket", rule="queued", le="0.005") == 0
    assert got.value(WAIT + "_bucket", rule="queued", le="1.0") == 2


def test_every_workers_throttle_series_merge_into_one_scrape() -> None:
    texts = {}
    for worker, names in ((0, ["refused"] * 3), (1, ["refused", "chained", "chained"])):
        gate, registry = gate_of(POLICY, Clock())
        admit(gate, names)
        texts[worker] = generate_latest(registry).decode()
    text = merge_workers(texts).decode()
    assert text.count(f"# TYPE {THROTTLED} counter") == 1
    assert text.count(f"# TYPE {WAIT} histogram") == 1
    got = samples(text)
    assert got.value(THROTTLED, worker="0", rule="refused", action="reject") == 2
    assert got.value(THROTTLED, worker="1", rule="refused", action="reject") == 0
    assert got.value(THROTTLED, worker="1", rule="chained", action="chain") == 1


def test_a_throttled_rule_a_reloaded_policy_file_adds_shows_at_0(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("routing_matrix:\n  - {rule_name: free, primary_target: n}\n")
    gate = PolicyGate(CONFIG, load_policy(path, CONFIG), path=path)
    registry = CollectorRegistry()
    gate.count_throttles(GatewayMetrics(registry).throttles)
    assert not [k for n, k in scraped(registry) if n == THROTTLED]
    path.write_text(POLICY)
    assert gate.check()  # swapped
    assert scraped(registry).value(THROTTLED, rule="refused", action="reject") == 0


RULES_Y = """routing_matrix:
  - {rule_name: y-only, primary_target: small, throttle_config: {max_rps: 0.1, burst_window: 10s, overflow: reject}}
"""


def test_an_arms_own_rules_are_counted_in_the_gateway_registry_and_after_a_reload(tmp_path: Path) -> None:
    async def run() -> tuple[list[int], Samples]:
        server = TestServer(upstream(reply(200), 0.1))
        await server.start_server()
        (tmp_path / "rules_y.yaml").write_text(RULES_Y)
        (tmp_path / "routelens.yaml").write_text(f"""
fleet:
  instances:
    - {{id: small-a, model: small, url: "{str(server.make_url('')).rstrip('/')}"}}
scrape: {{interval_s: 60}}
experiments:
  key: header:x-user-id
  arms:
    - {{name: x, router_version: v-x, share: 0.5}}
    - {{name: y, router_version: v-y, share: 0.5, policy: {{routing: {{policy: rules_y.yaml}}}}}}
""")
        config = read_config(tmp_path / "routelens.yaml")
        gw = Gateway(config, build_router(config), MemoryHooks())
        statuses = []
        async with TestClient(TestServer(gw.build_app())) as client:
            for i in range(4):
                if i == 2:
                    gw.reload(config)  # the arms' gates are built anew
                resp = await client.post("/v1/chat/completions", headers={"x-routelens-arm": "y"}, json={
                    "model": "auto", "messages": [{"role": "user", "content": "hello"}]})
                statuses.append(resp.status)
            got = samples(await (await client.get("/metrics")).text())
        await server.close()
        return statuses, got

    statuses, got = asyncio.run(run())
    assert statuses == [200, 429, 429, 429]  # the reloaded arm's gate draws on the same (shared) bucket
    assert got.value(THROTTLED, rule="y-only", action="reject") == 3
