"""The token-bucket leases' round trips: refill rounds, and the takes that wait for one.

A take is answered from its bucket's lease (:mod:`.redis_lease`, pure bookkeeping). When a lease
falls due, a refill is wanted, and the background of :class:`~router_core.shared.redis_shared.RedisShared`
runs a round: every due lease's refill in one pipeline. A take that the lease cannot answer (no
token held, no credit left) waits for rounds to end, at most ``timeout_s``, and tries again after
each. Redis going away or coming back drops the leases and ends the round in flight, so no take
waits for an answer that will not come.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from redis.asyncio.client import Pipeline

from router_core.shared.redis_lease import BucketLeases, Refill
from router_core.shared.redis_store import RedisStore

__all__ = ["LeaseRefills"]


class LeaseRefills:
    """Takes from the leases, the refill rounds that fill them, and the takes waiting for a round.

    Args:
        store: The connection.
        leases: The leases' bookkeeping.
        replicas: The replicas alive now (a lease's size depends on it).
        timeout_s: The longest a take waits for refills.
    """

    def __init__(self, store: RedisStore, leases: BucketLeases, replicas: Callable[[], int],
                 timeout_s: float) -> None:
        self.store, self.leases, self._replicas, self.timeout_s = store, leases, replicas, timeout_s
        self.rounds = 0  # refill rounds sent to Redis
        self.waits = 0  # takes that waited for a refill (lease and credit used up)
        self._due, self._round = asyncio.Event(), asyncio.Event()

    async def take(self, bucket: str, rate: float, burst: float, floor: float) -> tuple[bool, float] | None:
        """The lease's answer, after waiting for refills if need be; None: none in time, or Redis went down."""
        got = self._take(bucket, rate, burst, floor)
        if got is None:
            self.waits += 1
            got = await self._take_after_refill(bucket, rate, burst, floor)
        return got

    def _take(self, bucket: str, rate: float, burst: float, floor: float) -> tuple[bool, float] | None:
        got = self.leases.take(bucket, rate, burst, floor, self._replicas())
        if self.leases.due:
            self._due.set()
        return got

    async def _take_after_refill(self, bucket: str, rate: float, burst: float, floor: float,
                                 ) -> tuple[bool, float] | None:
        """Wait for refill rounds until the lease answers; None after ``timeout_s`` or when Redis went down."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while self.store.healthy and (left := deadline - loop.time()) > 0:
            done = self._round
            try:
                async with asyncio.timeout(left):
                    await done.wait()
            except TimeoutError:
                return None
            if not self.store.healthy:
                return None
            got = self._take(bucket, rate, burst, floor)
            if got is not None:
                return got
        return None

    async def wanted(self) -> None:
        """Return once a refill is due (then it is not wanted again until a take finds one due)."""
        await self._due.wait()
        self._due.clear()

    async def refill(self) -> None:
        """One refill round: every due lease's refill in one pipeline; then waiting takes try again."""
        rows = self.leases.requests()
        if rows:
            self.rounds += 1
            res = await self.store.run(lambda pipe: self.grants(pipe, rows))
            for i, row in enumerate(rows):
                if res is None:
                    self.leases.failed(row)
                else:
                    self.leases.granted(row, *self.store.granted(res[i]))
        self._end_round()

    def grants(self, pipe: Pipeline, rows: list[Refill]) -> None:
        """Queue each row's grant (charge its debt, take what it wants) on ``pipe``."""
        for r in rows:
            self.store.grant(pipe, r.lease.bucket, r.lease.rate, r.lease.burst, r.lease.floor, r.debt, r.want)

    def reset(self) -> None:
        """Redis went away or came back: what it lent is dropped either way, and waiting takes let go."""
        self.leases.clear()
        self._end_round()

    def _end_round(self) -> None:
        done, self._round = self._round, asyncio.Event()
        done.set()
