"""The claims a replica holds, written to Redis again when Redis comes back (a restarted Redis is empty).

A claim (:meth:`RedisShared.claim`: one verdict per request id) is held in this process first, then
taken in Redis by ``SET NX PX``; while Redis is down it is this replica's alone, and owed. At each
connection, before Redis is in use again (:meth:`Reclaims.sync`), this replica writes with ``SET NX``
and the TTL left: every claim it holds when the server is a new one (restarted empty, or a
failover), else the claims it took while Redis was down. So a request id claimed through one worker
before a restart of Redis is refused through any other after it.

What remains open: the claims of a worker that ended while Redis was down are gone with it; a
claim taken through two workers while Redis was down stands on both (``conflicts`` counts the
ones found at the rewrite); and after an outage, until every worker has reconnected (each tries
every ``retry_s``), an id held only by a worker not yet back can be claimed through another.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from redis.asyncio.client import Pipeline

from router_core.shared.base import MemoryShared
from router_core.shared.redis_store import RedisStore

__all__ = ["Reclaims"]


class Reclaims:
    """The claims this replica owes Redis, and their rewrite at a connection.

    Args:
        store: The connection.
        local: This process's claims (``MemoryShared``'s).
        name: The Redis key of a claim's key.
        batch: Claims written per round trip.
    """

    def __init__(self, store: RedisStore, local: MemoryShared, name: Callable[[str], str], *,
                 batch: int = 1000) -> None:
        self.store, self.local, self._name, self._batch = store, local, name, batch
        self.owed: set[str] = set()  # taken here while Redis was down
        self.written = 0  # claims written again at connections
        self.conflicts = 0  # ... that another replica held already (both had said yes)

    async def sync(self, new_server: bool) -> None:
        """Write the owed claims (every one held, on a new server); raises if Redis fails meanwhile.

        Claims taken while this runs (Redis is not in use yet: they are owed) are written too,
        before it returns: nothing is awaited between its last check and Redis being in use again.
        """
        done: set[str] = set()
        todo = self.local.claims_left(None if new_server else list(self.owed))
        while todo:
            for i in range(0, len(todo), self._batch):
                chunk = todo[i:i + self._batch]

                def build(pipe: Pipeline, chunk: list[tuple[str, float]] = chunk) -> None:
                    for key, left_s in chunk:
                        pipe.set(self._name(key), self.store.replica_id, nx=True, px=max(1, math.ceil(left_s * 1e3)))

                res = await self.store.run(build, anyway=True)
                if res is None:
                    raise ConnectionError("claims not written again")
                self.written += len(chunk)
                self.conflicts += sum(1 for took in res if not took)
                done.update(key for key, _ in chunk)
            todo = self.local.claims_left(list(self.owed - done))  # taken meanwhile
        self.owed.clear()
