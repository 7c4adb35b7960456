"""Crash and restart through the fleet: the port really closes, and the instance comes back cold."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import aiohttp
from aiohttp import ClientSession

from schemas.config import RouteLensConfig
from sim.clock import VirtualClock
from sim.fleet import FleetHandle, start_fleet
from tests.promtext import value

CONFIG = {
    "fleet": {"instances": [{"id": "a", "model": "m", "url": "http://127.0.0.1:0"},
                            {"id": "b", "model": "m", "url": "http://127.0.0.1:0"}]},
    "sim": {"zero_delay": True, "models": {"m": {"warmup_s": 90}}},
}
T = TypeVar("T")
BODY = {"model": "m", "messages": [{"role": "user", "content": "How are you doing today?"}]}


async def _status(http: ClientSession, url: str) -> int | str:
    try:
        async with http.post(f"{url}/v1/chat/completions", json=BODY) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientConnectionError as exc:
        return type(exc).__name__


async def _gauge(http: ClientSession, url: str, name: str, **labels: str) -> float:
    async with http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    return value(text, name, model_name="m", engine="0", **labels)


async def _poll(probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], tries: int = 200) -> T:
    """Call ``probe`` every 20 ms until ``done`` accepts its result (at most ``tries`` calls); return the last one.

    Bounded: faults start and end in tasks on the fleet's loop, a little after the request that asked.
    """
    for _ in range(tries):
        result = await probe()
        if done(result):
            break
        await asyncio.sleep(0.02)
    return result


async def _until_up(http: ClientSession, url: str) -> int | str:
    return await _poll(lambda: _status(http, url), lambda status: status == 200)


@asynccontextmanager
async def _warm_fleet(events: list[tuple[str, str, str | None]]) -> AsyncIterator[tuple[FleetHandle, ClientSession]]:
    """Both instances past their warm-up (virtual clock) and a client; fault events go to ``events``."""
    clock = VirtualClock()
    handle = await start_fleet(RouteLensConfig.model_validate(CONFIG), clock=clock,
                               on_fault=lambda e, r: events.append((e, r.kind.value, r.end_reason)))
    try:
        async with ClientSession() as http:
            clock.advance(100)
            yield handle, http
    finally:
        await handle.close()


def test_crash_drops_connections_keeps_admin_and_recovery_comes_back_cold():
    events: list[tuple[str, str, str | None]] = []

    async def scenario():
        async with _warm_fleet(events) as (handle, http):
            a, b = handle.urls["a"], handle.urls["b"]
            warm = await _gauge(http, a, "routelens_sim_warmup_progress")
            async with http.post(f"{a}/admin/faults", json={"kind": "crash"}) as resp:
                assert resp.status == 201
            down = await _status(http, a)  # dropped connections; never a 200
            async with http.get(f"{a}/admin/faults") as resp:  # the admin API survives the crash
                admin = resp.status, [f["kind"] for f in (await resp.json())["active"]]
            other = await _status(http, b)
            async with http.delete(f"{a}/admin/faults") as resp:  # ended through the admin API
                cleared = resp.status
            up = await _until_up(http, a)
            cold = await _gauge(http, a, "routelens_sim_warmup_progress")
            return warm, down, admin, other, cleared, up, cold

    warm, down, admin, other, cleared, up, cold = asyncio.run(scenario())
    assert warm == 1.0 and cold == 0.0
    assert down in ("ServerDisconnectedError", "ClientOSError") and other == 200 and up == 200
    assert admin == (200, ["crash"]) and cleared == 200
    assert events == [("start", "crash", None), ("end", "crash", "cleared")]


def test_restart_is_a_short_outage_that_resets_counters_and_warmup():
    events: list[tuple[str, str, str | None]] = []

    async def restarted() -> bool:
        return ("end", "restart", "restarted") in events

    async def scenario():
        async with _warm_fleet(events) as (handle, http):
            a = handle.urls["a"]
            await _status(http, a)
            before = await _gauge(http, a, "vllm:request_success_total", finished_reason="stop")
            async with http.post(f"{a}/admin/faults", json={"kind": "leak", "rate": 0.5}) as resp:
                assert resp.status == 201
            async with http.post(f"{a}/admin/faults", json={"kind": "restart", "duration_s": 0.1}) as resp:
                assert resp.status == 201
            assert await _poll(restarted, lambda ended: ended)
            assert await _until_up(http, a) == 200
            after = await _gauge(http, a, "vllm:request_success_total", finished_reason="stop")
            return before, after, await _gauge(http, a, "routelens_sim_warmup_progress")

    before, after, warmup = asyncio.run(scenario())
    assert before == 1.0 and after == 1.0  # the counter restarted from zero; one request since
    assert warmup == 0.0
    assert ("end", "leak", "restart") in events and ("end", "restart", "restarted") in events
