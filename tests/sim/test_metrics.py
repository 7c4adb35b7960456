"""``/metrics`` under vLLM's names, occupancy under load, and the admin overrides."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import ClientSession

from schemas.config import SimModelProfile, SimSettings
from sim.server import build_instance_app
from tests.promtext import Samples, samples
from tests.sim.conftest import SPEC_LABELS

GAUGES = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc")
BODY = {"model": "auto", "messages": [{"role": "user", "content": "Solve the equation 3x + 7 = 25."}]}


def _value(scrape: Samples, name: str, **labels: str) -> float:
    return scrape.value(name, **SPEC_LABELS, **labels)


async def _scrape(http: ClientSession, url: str) -> Samples:
    async with http.get(f"{url}/metrics") as resp:
        assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/plain")
        return samples(await resp.text())


def test_metrics_parse_with_vllm_names_and_count_requests(spec, profile, fast, serve):
    async def scenario():
        async with serve(build_instance_app(spec, profile, fast)) as url, ClientSession() as http:
            before = await _scrape(http, url)
            async with http.post(f"{url}/v1/chat/completions", json=BODY) as resp:
                usage = (await resp.json())["usage"]
            return before, await _scrape(http, url), usage

    before, after, usage = asyncio.run(scenario())
    for name in GAUGES:
        assert _value(before, name) == 0.0
    assert _value(after, "vllm:request_success_total", finished_reason="stop") == 1.0
    assert _value(after, "vllm:prompt_tokens_total") == usage["prompt_tokens"]
    assert _value(after, "vllm:generation_tokens_total") == usage["completion_tokens"]
    assert _value(after, "vllm:e2e_request_latency_seconds_count") == 1.0
    assert _value(after, "vllm:time_to_first_token_seconds_count") == 1.0


def test_gauges_rise_under_load_beyond_max_concurrency(spec, serve):
    # 4000 ms of base latency at time_scale 20 holds each request for 0.2 s of real time.
    profile = SimModelProfile(base_latency_ms=4000, max_concurrency=2, kv_tokens=1024)
    settings = SimSettings(time_scale=20, seed=3)
    seen: dict[str, float] = dict.fromkeys(GAUGES, 0.0)

    async def scenario():
        async with serve(build_instance_app(spec, profile, settings)) as url, ClientSession() as http:
            async def call() -> int:
                async with http.post(f"{url}/v1/chat/completions", json=BODY) as resp:
                    return resp.status

            load = asyncio.gather(*(call() for _ in range(6)))
            while not load.done():
                scrape = await _scrape(http, url)
                for name in GAUGES:
                    seen[name] = max(seen[name], _value(scrape, name))
                await asyncio.sleep(0.01)
            return await load, await _scrape(http, url)

    statuses, final = asyncio.run(scenario())
    assert statuses == [200] * 6
    assert seen["vllm:num_requests_running"] == 2.0
    assert seen["vllm:num_requests_waiting"] >= 1.0
    assert 0.0 < seen["vllm:kv_cache_usage_perc"] <= 1.0
    assert [_value(final, name) for name in GAUGES] == [0.0, 0.0, 0.0]
    assert _value(final, "vllm:request_success_total", finished_reason="stop") == 6.0


def test_overrides_force_and_clear_reported_gauges(spec, profile, fast, serve):
    async def post(http: ClientSession, url: str, body: Any) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with http.post(f"{url}/admin/overrides", data=data) as resp:
            return resp.status, await resp.json()

    async def scenario():
        async with serve(build_instance_app(spec, profile, fast)) as url, ClientSession() as http:
            forced = await post(http, url, {"kv_cache_usage": 0.95, "queue": 12})
            forced_metrics = await _scrape(http, url)
            async with http.get(f"{url}/admin/overrides") as resp:
                current = await resp.json()
            cleared = await post(http, url, {"queue": None})
            cleared_metrics = await _scrape(http, url)
            bad = [await post(http, url, body) for body in ({"kv_cache_usage": 2}, {"bogus": 1}, b"{nope")]
            return forced, forced_metrics, current, cleared, cleared_metrics, bad

    forced, forced_metrics, current, cleared, cleared_metrics, bad = asyncio.run(scenario())
    assert forced == (200, {"kv_cache_usage": 0.95, "queue": 12.0, "running": None})
    assert current == forced[1]
    assert _value(forced_metrics, "vllm:kv_cache_usage_perc") == 0.95
    assert _value(forced_metrics, "vllm:num_requests_waiting") == 12.0
    assert _value(forced_metrics, "vllm:num_requests_running") == 0.0
    assert cleared == (200, {"kv_cache_usage": 0.95, "queue": None, "running": None})
    assert _value(cleared_metrics, "vllm:num_requests_waiting") == 0.0
    assert _value(cleared_metrics, "vllm:kv_cache_usage_perc") == 0.95
    assert [status for status, _ in bad] == [400, 400, 400]
    assert bad[0][1]["error"]["param"] == "kv_cache_usage"
