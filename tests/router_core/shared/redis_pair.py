"""Two RedisShared replicas, ``a`` and ``b``, of one Redis for a test body (shared by the shared-state tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from router_core.shared.redis_shared import RedisShared

# presence_s=0: every flush beats; flush_s long: the tests flush when they mean to (messages still go at once)
QUIET: dict[str, Any] = {"key_prefix": "t:", "retry_s": 0.05, "presence_s": 0.0, "flush_s": 3600.0}


async def until(cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Return once ``cond()`` is true; TimeoutError (the test fails) if it is not within ``timeout_s``."""
    async def wait() -> None:
        while not cond():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout_s)


def run_pair(url: str, body: Callable[[RedisShared, RedisShared], Awaitable[None]], *, beat_again: bool = False,
             **kw: Any) -> None:
    """Run ``body(a, b)`` on replicas ``a`` and ``b``, ``RedisShared(url, **kw)`` both, started, closed after.

    ``beat_again``: ``a`` flushes once both are started, so it counts ``b`` too.
    """
    async def run() -> None:
        a, b = RedisShared(url, replica_id="a", **kw), RedisShared(url, replica_id="b", **kw)
        await a.start()
        await b.start()
        if beat_again:
            await a.flush()
        try:
            await body(a, b)
        finally:
            await a.close()
            await b.close()

    asyncio.run(run())


async def redis_command(url: str, *command: str) -> Any:
    """One command on a connection of its own (what a test reads or writes behind the replicas' backs)."""
    client = aioredis.from_url(url)
    try:
        return await client.execute_command(*command)
    finally:
        await client.aclose()
