"""A starting replica's binding mirror, filled in the background from the bindings Redis holds.

Until it is filled, and for a key it does not hold, the replica places a session it does not know
anew, until Redis's answer to its write corrects it (:mod:`.redis_bindings`).
"""

from __future__ import annotations

from redis.asyncio.client import Pipeline

from router_core.shared.redis_bindings import BindingMirror
from router_core.shared.redis_store import RedisStore

__all__ = ["read_bindings"]


async def read_bindings(store: RedisStore, mirror: BindingMirror, batch: int = 500) -> None:
    """Read the bindings Redis holds into ``mirror`` (until it is full), ``batch`` keys a round trip.

    Raises what the Redis client raises when Redis goes away meanwhile.
    """
    skip = len(store.key("bind", ""))
    keys: list[bytes] = []

    async def read() -> None:
        def build(pipe: Pipeline) -> None:
            for k in keys:
                pipe.get(k)
                pipe.pttl(k)

        res = await store.run(build) or []
        for k, value, ttl_ms in zip(keys, res[::2], res[1::2], strict=False):
            if value is not None and ttl_ms > 0:
                mirror.warm(k.decode()[skip:], value.decode(), ttl_ms)
        keys.clear()

    async for k in store.client.scan_iter(match=store.key("bind", "*"), count=batch):
        keys.append(k)
        if len(keys) >= batch:
            await read()
        if mirror.full:
            return
    if keys:
        await read()
