"""The counters' totals a replica knows, written back into a new (restarted, empty) Redis.

A restarted Redis holds no counters: a budget's spend would start again mid-window from the adds
owed since the outage alone, and the fleet could spend the budget twice. So at a connection to a
new server, before Redis is in use (:meth:`RedisShared._sync`), each replica writes the last total
it knew of each counter still within its TTL (:meth:`CounterBatch.known`: from its flushes'
answers and its reads), for the TTL that was left, with max semantics (:meth:`RedisStore.restore`):
the counter becomes the largest total any replica restored plus every add made on the new server,
so N replicas restoring the same total count it once, whether their owed adds land before or
after the others' restores. The owed adds (this replica's pending ones) then go with the next flush,
as after any outage; they are never part of a known total, so they are counted once.

What remains: spend flushed to the old server after the last total a surviving replica knew, by
replicas that have since died, is lost (a live replica's own flushed adds are in its own last
total); an add the old server applied but whose answer was lost is pending still, and counted again
when a live replica's known total held it already (spend errs high, as after any lost answer); a
negative add (a refund) can be undone by a larger total known before it (errs high too).
"""

from __future__ import annotations

import math

from redis.asyncio.client import Pipeline

from router_core.shared.redis_counters import CounterBatch
from router_core.shared.redis_store import RedisStore

__all__ = ["restore_totals"]


async def restore_totals(store: RedisStore, counters: CounterBatch, *, batch: int = 500) -> int:
    """Write every known total into Redis (max semantics), ``batch`` a round trip; how many were written.

    The answers (the counters' totals on the new server) become the known totals. Raises
    ``ConnectionError`` when Redis fails meanwhile (the next connection restores them all again:
    restoring a total twice changes nothing).
    """
    rows = counters.known()
    for i in range(0, len(rows), batch):
        chunk = rows[i:i + batch]

        def build(pipe: Pipeline, chunk: list[tuple[str, float, float]] = chunk) -> None:
            for counter, total, left_s in chunk:
                store.restore(pipe, counter, total, math.ceil(left_s * 1e3))

        res = await store.run(build, anyway=True)
        if res is None:
            raise ConnectionError("counters' totals not written again")
        for (counter, _, _), (total, ms) in zip(chunk, res, strict=True):
            counters.learned(counter, float(total), max(0, int(ms)) / 1e3)
    return len(rows)
