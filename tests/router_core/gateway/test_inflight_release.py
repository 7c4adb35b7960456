"""A stream's in-flight count ends however its relay ends: a client leaving mid-stream cancels the relay.

An ``engine: external`` instance is never scraped, so nothing else would ever clear a count left
behind: each such stream would make the instance look busier for good.
"""

from __future__ import annotations

import asyncio

from tests.router_core.gateway.gateway_kit import served_gateway
from tests.router_core.gateway.test_streaming import STREAM, streamer


async def leave_mid_stream() -> tuple[int, int]:
    async with served_gateway({"a": streamer(pause_s=0.5)},
                              instances={"a": {"engine": "external"}}) as (client, _, gateway):
        resp = await client.post("/v1/chat/completions", json=STREAM)
        assert resp.status == 200
        assert await resp.content.readany()  # the first word: the relay is under way
        during = gateway.inflight.count("a")
        resp.close()  # the client leaves: aiohttp's test server cancels the handler mid-relay
        for _ in range(100):  # until the cancelled handler has run its clean-up
            await asyncio.sleep(0.02)
            if gateway.inflight.count("a") == 0:
                break
        return during, gateway.inflight.count("a")


def test_a_client_leaving_mid_stream_ends_the_in_flight_count() -> None:
    during, after = asyncio.run(leave_mid_stream())
    assert during == 1
    assert after == 0  # was 1: left counted until a scrape that never comes
