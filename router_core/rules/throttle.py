"""Token buckets per rule (or per shared bucket name), with a priority queue for those who wait.

A rule's ``throttle_config`` (``max_rps``, ``burst_window``) is a bucket of ``max_rps *
burst_window`` tokens refilled at ``max_rps`` a second. A request that finds it empty goes down
the chain, is refused with ``Retry-After``, or waits up to ``max_wait`` — and when several wait on
one bucket (rules may share one), the higher ``priority`` gets the next token, then the earlier.
The clock is injected; waiting uses the running event loop.

With a :class:`SharedState` (``shared.backend: redis``) the buckets are the shared store's, so
every gateway replica draws on the same one; a waiter then retries the shared bucket when a token
is due (priority orders only the waiters of one process: across replicas, the first retry wins).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from router_core.rules.ir import Rule, Throttle
from router_core.shared.base import SharedState

__all__ = ["Admission", "Throttles", "TokenBucket"]


@dataclass(slots=True)
class TokenBucket:
    """``rate`` tokens a second up to ``burst``; starts full."""

    rate: float
    burst: float
    tokens: float = field(default=-1.0)
    at: float = 0.0

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = self.burst

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = max(self.at, now)

    def take(self, now: float) -> bool:
        """Take one token if there is one."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def wait_s(self, now: float) -> float:
        """Seconds until a token is there."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate


@dataclass(frozen=True, slots=True)
class Admission:
    """What the throttle did: admitted (``action`` None), or ``chain`` / ``reject`` / ``wait`` with details."""

    admitted: bool
    action: str | None = None
    retry_after_s: float = 0.0
    waited_s: float = 0.0


class Throttles:
    """The buckets of a rule set's throttled rules, keyed by ``bucket`` or rule name.

    Args:
        clock: Monotonic seconds (injected).
        shared: Where the buckets are when replicas share them (None: this process).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic, shared: SharedState | None = None) -> None:
        self._clock = clock
        self._shared = shared
        self._buckets: dict[str, TokenBucket] = {}
        self._waiters: dict[str, list[tuple[int, int, asyncio.Future[None]]]] = {}
        self._seq = itertools.count()
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def _bucket(self, key: str, spec: Throttle) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None or (bucket.rate, bucket.burst) != (spec.rate, spec.burst):  # new, or reloaded
            bucket = self._buckets[key] = TokenBucket(spec.rate, spec.burst, at=self._clock())
        return bucket

    def tokens(self, key: str) -> float | None:
        """Tokens left in a bucket (None: no such bucket yet)."""
        bucket = self._buckets.get(key)
        return None if bucket is None else bucket.tokens

    async def admit(self, rule: Rule) -> Admission:
        """Take a token for a request matched by ``rule``, or say what its overflow setting does."""
        spec = rule.throttle
        if spec is None:
            return Admission(True)
        key = spec.bucket or rule.name
        if self._shared is not None:
            return await self._admit_shared(self._shared, key, spec)
        bucket, now = self._bucket(key, spec), self._clock()
        if not self._waiters.get(key) and bucket.take(now):  # nobody queued ahead
            return Admission(True)
        wait = bucket.wait_s(now)
        if spec.overflow == "chain":
            return Admission(False, "chain", retry_after_s=wait)
        if spec.overflow == "reject" or wait > spec.max_wait_s:
            return Admission(False, "reject", retry_after_s=max(wait, 1e-3))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters.setdefault(key, []), (-rule.priority, next(self._seq), fut))
        self._schedule(key, bucket)
        try:
            await asyncio.wait_for(asyncio.shield(fut), spec.max_wait_s)
        except TimeoutError:
            self._drop(key, fut)
            return Admission(False, "reject", retry_after_s=bucket.wait_s(self._clock()))
        return Admission(True, "wait", waited_s=self._clock() - now)

    async def _admit_shared(self, shared: SharedState, key: str, spec: Throttle) -> Admission:
        """:meth:`admit` on the shared bucket ``rule:<key>``: a waiter retries when a token is due."""
        t0 = self._clock()
        taken, wait = await shared.take("rule:" + key, spec.rate, spec.burst)
        if taken:
            return Admission(True)
        if spec.overflow == "chain":
            return Admission(False, "chain", retry_after_s=wait)
        if spec.overflow == "reject" or wait > spec.max_wait_s:
            return Admission(False, "reject", retry_after_s=max(wait, 1e-3))
        while True:
            left = spec.max_wait_s - (self._clock() - t0)
            if wait > left:
                return Admission(False, "reject", retry_after_s=max(wait, 1e-3))
            await asyncio.sleep(wait)
            taken, wait = await shared.take("rule:" + key, spec.rate, spec.burst)
            if taken:
                return Admission(True, "wait", waited_s=self._clock() - t0)

    def _schedule(self, key: str, bucket: TokenBucket) -> None:
        if key in self._timers:
            return
        delay = bucket.wait_s(self._clock())
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._release, key, bucket)

    def _release(self, key: str, bucket: TokenBucket) -> None:
        """Hand the tokens that are there to the waiters, best priority first; re-arm while any wait."""
        self._timers.pop(key, None)
        heap = self._waiters.get(key, [])
        while heap:
            if heap[0][2].done():  # gave up waiting: takes no token
                heapq.heappop(heap)
            elif bucket.take(self._clock()):
                heapq.heappop(heap)[2].set_result(None)
            else:
                break
        if heap:
            self._schedule(key, bucket)

    def _drop(self, key: str, fut: asyncio.Future[None]) -> None:
        heap = self._waiters.get(key, [])
        heap[:] = [w for w in heap if w[2] is not fut]
        heapq.heapify(heap)
        if not fut.done():
            fut.cancel()

