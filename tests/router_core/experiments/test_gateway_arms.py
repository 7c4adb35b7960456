"""The gateway in-process: each request served by its arm, traced with the arm's version and hash; shadow; reload."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from router_core.decide.builtin import build_router
from router_core.experiments import ConfigWatcher, read_config
from router_core.gateway import Gateway
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from tests.router_core.gateway.gateway_kit import CHAT, served_gateway
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply

BALANCED = {"scoring": {"preset": "balanced"}}
BAN_A = {"constraints": [
    {"name": "ban-a", "metric": "kv_cache_usage", "threshold": 0.0, "exit_for": 0, "instances": ["a"]}]}


def experiments(share_x: float = 0.5, **kw: Any) -> dict[str, Any]:
    return {"key": "header:x-user-id", "arms": [
        {"name": "x", "router_version": "v-x", "share": share_x},
        {"name": "y", "router_version": "v-y", "share": round(1 - share_x, 12), "policy": BALANCED}], **kw}


async def serve(raw_experiments: dict[str, Any], requests: list[dict[str, str]],
                between: Any = None) -> tuple[list[tuple[int, dict[str, Any]]], MemoryHooks, Gateway]:
    out = []
    async with served_gateway({iid: reply(200) for iid in ("a", "b")},
                              sections={"experiments": raw_experiments}) as (client, hooks, gateway):
        for i, headers in enumerate(requests):
            if between is not None and i == len(requests) // 2:
                between(gateway)
            resp = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
            out.append((resp.status, {**(await resp.json()), "rid": resp.headers["x-request-id"]}))
        for _ in range(3):
            await asyncio.sleep(0)  # shadowed traces are emitted just after their response
    return out, hooks, gateway


def test_every_trace_carries_the_arm_that_served_it() -> None:
    users = [{"x-user-id": f"u{i}"} for i in range(40)]
    out, hooks, gw = asyncio.run(serve(experiments(), users + users))
    assert gw.experiment is not None
    arms = gw.experiment.arms.by_name
    by_user: dict[str, str] = {}
    for (status, body), headers in zip(out, users + users, strict=True):
        assert status == 200
        t = hooks.traces[body["rid"]]
        assert t.experiment_arm in arms
        arm = arms[t.experiment_arm]
        assert (t.router_version, t.policy_hash) == (arm.router_version, gw.book.hash_of(arm.router.policy))
        assert by_user.setdefault(headers["x-user-id"], t.experiment_arm) == t.experiment_arm  # sticky per user
        assert t.selection_probability == 1.0 and t.shadow is None
    assert set(by_user.values()) == {"x", "y"} and arms["x"].policy_hash != arms["y"].policy_hash
    assert gw.book.hash_of(arms["x"].router.policy) != gw.book.hash_of(arms["y"].router.policy)


def test_the_forcing_header_wins_and_an_unknown_arm_is_a_400() -> None:
    out, hooks, _ = asyncio.run(serve(experiments(share_x=1.0), [
        {"x-user-id": "u1", "x-routelens-arm": "y"}, {"x-user-id": "u1"}, {"x-routelens-arm": "nope"}]))
    assert [s for s, _ in out] == [200, 200, 400]
    assert [hooks.traces[b["rid"]].experiment_arm for _, b in out[:2]] == ["y", "x"]
    assert [hooks.traces[b["rid"]].arm_forced for _, b in out[:2]] == [True, False]
    err = out[2][1]["error"]
    assert err["param"] == "x-routelens-arm" and err["code"] == "unknown_arm" and "x, y" in err["message"]
    assert hooks.traces[out[2][1]["rid"]].outcome.http_status == 400  # refused, and traced


def test_a_shadow_policy_records_its_decision_in_the_trace() -> None:
    out, hooks, _ = asyncio.run(serve(
        experiments(shadow={"router_version": "v-rc", "policy": BAN_A}), [{"x-user-id": f"u{i}"} for i in range(20)]))
    traces = [hooks.traces[b["rid"]] for _, b in out]
    assert all(t.shadow is not None for t in traces)
    for t in traces:
        assert t.shadow is not None and t.shadow.router_version == "v-rc" and t.shadow.selected_instance == "b"
        assert t.shadow.flipped == (t.selected_instance == "a")
        assert t.shadow.live_rank == (None if t.selected_instance == "a" else 1)


def test_a_sampled_shadow_decides_a_share_of_requests() -> None:
    out, hooks, _ = asyncio.run(serve(experiments(shadow={"arm": "y", "sample": 0.5}), [{}] * 60))
    shadows = [hooks.traces[b["rid"]].shadow for _, b in out]
    assert 10 < sum(s is not None for s in shadows) < 50
    assert all(s.arm == "y" and s.router_version == "v-y" for s in shadows if s is not None)


def test_reload_changes_shares_and_users_who_keep_their_arm_stay(tmp_path: Path) -> None:
    users = [{"x-user-id": f"u{i}"} for i in range(60)]

    def all_to_y(gw: Gateway) -> None:
        gw.reload(gw.config.model_copy(update={"experiments": RouteLensConfig.model_validate(
            {"fleet": gw.config.fleet.model_dump(), "experiments": experiments(share_x=0.0)}).experiments}))

    out, hooks, _ = asyncio.run(serve(experiments(share_x=0.5), users + users, between=all_to_y))
    before = {u["x-user-id"]: hooks.traces[b["rid"]].experiment_arm for u, (_, b) in zip(users, out[:60], strict=True)}
    after = {u["x-user-id"]: hooks.traces[b["rid"]].experiment_arm for u, (_, b) in zip(users, out[60:], strict=True)}
    assert set(after.values()) == {"y"} and "x" in before.values()
    assert all(after[u] == "y" for u, arm in before.items() if arm == "y")  # y's users never moved


def test_the_watcher_applies_a_changed_file_and_keeps_the_old_one_on_error(tmp_path: Path) -> None:
    path = tmp_path / "routelens.yaml"
    base = {"fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
            "experiments": experiments()}
    path.write_text(yaml.safe_dump(base))
    applied: list[RouteLensConfig] = []
    watcher = ConfigWatcher(path, applied.append)
    assert not watcher.check()  # unchanged
    path.write_text(yaml.safe_dump({**base, "experiments": experiments(share_x=0.2)}))
    assert watcher.check() and applied[-1].experiments is not None
    assert applied[-1].experiments.arms[0].share == 0.2
    path.write_text(yaml.safe_dump({**base, "experiments": experiments(share_x=0.3) | {"arms": [
        {"name": "x", "router_version": "v", "share": 0.3}]}}))
    assert not watcher.check() and watcher.last_error and "sum to 1" in watcher.last_error
    assert len(applied) == 1


def test_read_config_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.yaml"):
        read_config(tmp_path / "nope.yaml")


def test_the_router_state_shows_the_arms_in_force() -> None:
    async def state() -> dict[str, Any]:
        config = RouteLensConfig.model_validate({
            "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:1"}]},
            "scrape": {"interval_s": 60}, "experiments": experiments(shadow={"arm": "y", "sample": 0.1})})
        gw = Gateway(config, build_router(config), MemoryHooks())
        async with TestClient(TestServer(gw.build_app())) as client:
            resp = await client.get("/v1/router/state")
            body: dict[str, Any] = await resp.json()
            return body

    exp = asyncio.run(state())["experiment"]
    assert [(a["name"], a["share"]) for a in exp["arms"]] == [("x", 0.5), ("y", 0.5)]
    assert exp["shadow"]["arm"] == "y" and exp["shadow"]["sample"] == 0.1 and exp["key"] == "header:x-user-id"
