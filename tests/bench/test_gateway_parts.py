"""The benchmarks' reference parts: the bare proxy relays an answer as it came; the ping-pong and Redis report."""

from __future__ import annotations

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from bench.bare_proxy import bare_app
from bench.loopback import ping_pong


def test_the_bare_proxy_relays_the_upstreams_status_and_body() -> None:
    seen: list[bytes] = []

    async def instance(request: web.Request) -> web.Response:
        seen.append(await request.read())
        return web.json_response({"id": "x", "usage": {"total_tokens": 3}}, status=201)

    async def run() -> tuple[int, bytes]:
        upstream_app = web.Application()
        upstream_app.router.add_post("/v1/chat/completions", instance)
        async with TestServer(upstream_app) as upstream:
            url = str(upstream.make_url("/v1/chat/completions"))
            async with TestClient(TestServer(bare_app(url))) as client:
                resp = await client.post("/v1/chat/completions", data=b'{"model": "m"}')
                return resp.status, await resp.read()

    status, body = asyncio.run(run())
    assert (status, body, seen) == (201, b'{"id": "x", "usage": {"total_tokens": 3}}', [b'{"model": "m"}'])


def test_the_ping_pong_reports_both_placements_in_order() -> None:
    figures = ping_pong(200)
    assert set(figures) == {"cross_cpu_p50_us", "cross_cpu_p99_us", "same_cpu_p50_us", "same_cpu_p99_us"}
    assert all(0 < figures[f"{w}_p50_us"] <= figures[f"{w}_p99_us"] for w in ("cross_cpu", "same_cpu"))


def test_the_redis_bench_reports_what_the_shared_state_adds_to_a_request() -> None:
    from bench.redis_bench import redis_bench  # starts a redis-server of its own (the Makefile installs it)

    figures = redis_bench(requests=300, clients=10, rate_rps=3000.0)
    assert {"redis_p50_ms", "redis_p99_ms", "memory_p99_ms", "added_p99_ms", "requests"} <= set(figures)
    assert figures["requests"] == 300
    assert 0 < figures["redis_p50_ms"] <= figures["redis_p99_ms"]
