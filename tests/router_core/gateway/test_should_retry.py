"""A 502 after every instance ran out of its time tells OpenAI's SDKs not to retry it (``x-should-retry: false``).

Before, the SDK retried it twice by default: each retry tried every instance again and waited out
each one's ``gateway.upstream_timeout_s`` again (a long generation past 60 s: six minutes of
upstream work for one failed call).
"""

from __future__ import annotations

import asyncio

import openai
import pytest
from aiohttp import web

from tests.router_core.gateway.gateway_kit import served_gateway


def test_every_attempt_timed_out_the_sdk_does_not_retry_and_other_failures_it_does() -> None:
    asyncio.run(_run())


async def _run() -> None:
    calls = {"slow": 0, "broken": 0}

    async def slow(request: web.Request) -> web.Response:
        calls["slow"] += 1
        await asyncio.sleep(1.0)  # past the gateway's 0.2 s
        return web.json_response({})

    async def broken(request: web.Request) -> web.Response:
        calls["broken"] += 1
        return web.json_response({"error": {"message": "boom"}}, status=500)

    for name, handler in (("slow", slow), ("broken", broken)):
        async with served_gateway({"a": handler, "b": handler},
                                  gateway={"max_attempts": 2, "upstream_timeout_s": 0.2}) as (client, _, _g):
            sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="sk-test", max_retries=2,
                                     timeout=30)
            async with sdk:
                with pytest.raises(openai.APIStatusError) as info:
                    await sdk.with_options(max_retries=2).chat.completions.create(
                        model="m", messages=[{"role": "user", "content": "hi"}])
            assert info.value.status_code == 502
            retry = info.value.response.headers.get("x-should-retry")
            if name == "slow":
                assert retry == "false" and calls["slow"] == 2  # one call: both instances once, no SDK retry
            else:
                assert retry is None and calls["broken"] == 6  # a 5xx: the SDK's two retries, both instances each
