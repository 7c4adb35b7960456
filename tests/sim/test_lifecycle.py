"""Crash and restart through the fleet: the port really closes, and the instance comes back cold."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import ClientSession
from prometheus_client.parser import text_string_to_metric_families

from schemas.config import RouteLensConfig
from sim.clock import VirtualClock
from sim.fleet import start_fleet

CONFIG = {
    "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:0"},
                            {"id": "b", "model": "m", "url": "http://127.0.0.1:0"}]},
    "sim": {"zero_delay": True, "models": {"m": {"warmup_s": 90}}},
}
BODY = {"model": "m", "messages": [{"role": "user", "content": "How are you doing today?"}]}


async def _status(http: ClientSession, url: str) -> int | str:
    try:
        async with http.post(f"{url}/v1/chat/completions", json=BODY) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientConnectionError as exc:
        return type(exc).__name__


async def _gauge(http: ClientSession, url: str, name: str) -> float:
    async with http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    return next(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


async def _until_up(http: ClientSession, url: str) -> int | str:
    for _ in range(200):  # bounded: recovery is a task on the fleet's loop
        status = await _status(http, url)
        if status == 200:
            return status
        await asyncio.sleep(0.02)
    return status


def test_crash_closes_the_port_and_recovery_comes_back_cold():
    clock = VirtualClock()
    events: list[tuple[str, str, str | None]] = []

    async def scenario():
        handle = await start_fleet(RouteLensConfig.model_validate(CONFIG), clock=clock,
                                   on_fault=lambda e, r: events.append((e, r.kind.value, r.end_reason)))
        try:
            a, b = handle.urls["a"], handle.urls["b"]
            async with ClientSession() as http:
                clock.advance(100)
                warm = await _gauge(http, a, "routelens_sim_warmup_progress")
                async with http.post(f"{a}/admin/faults", json={"kind": "crash"}) as resp:
                    assert resp.status == 201
                for _ in range(200):  # dropped connections first, then a closed port
                    down = await _status(http, a)
                    assert down != 200
                    if down == "ClientConnectorError":
                        break
                    await asyncio.sleep(0.02)
                other = await _status(http, b)
                handle.instances["a"].clear()
                up = await _until_up(http, a)
                cold = await _gauge(http, a, "routelens_sim_warmup_progress")
                return warm, down, other, up, cold
        finally:
            await handle.close()

    warm, down, other, up, cold = asyncio.run(scenario())
    assert warm == 1.0 and cold == 0.0
    assert down == "ClientConnectorError" and other == 200 and up == 200
    assert events == [("start", "crash", None), ("end", "crash", "cleared")]


def test_restart_is_a_short_outage_that_resets_counters_and_warmup():
    clock = VirtualClock()
    events: list[tuple[str, str, str | None]] = []

    async def scenario():
        handle = await start_fleet(RouteLensConfig.model_validate(CONFIG), clock=clock,
                                   on_fault=lambda e, r: events.append((e, r.kind.value, r.end_reason)))
        try:
            a = handle.urls["a"]
            async with ClientSession() as http:
                clock.advance(100)
                await _status(http, a)
                before = await _gauge(http, a, "vllm:request_success_total")
                async with http.post(f"{a}/admin/faults", json={"kind": "leak", "rate": 0.5}) as resp:
                    assert resp.status == 201
                async with http.post(f"{a}/admin/faults", json={"kind": "restart", "duration_s": 0.1}) as resp:
                    assert resp.status == 201
                while not any(e[1] == "restart" and e[0] == "end" for e in events):
                    await asyncio.sleep(0.02)
                await _until_up(http, a)
                after = await _gauge(http, a, "vllm:request_success_total")
                return before, after, await _gauge(http, a, "routelens_sim_warmup_progress")
        finally:
            await handle.close()

    before, after, warmup = asyncio.run(scenario())
    assert before == 1.0 and after == 1.0  # the counter restarted from zero; one request since
    assert warmup == 0.0
    assert ("end", "leak", "restart") in events and ("end", "restart", "restarted") in events
