"""Token buckets per rule (or per shared bucket name), with a priority queue for those who wait.

A rule's ``throttle_config`` (``max_rps``, ``burst_window``) is a bucket of ``max_rps *
burst_window`` tokens refilled at ``max_rps`` a second. A request that finds it empty goes down
the chain, is refused with ``Retry-After``, or waits up to ``max_wait`` — and when several wait on
one bucket (rules may share one), the higher ``priority`` gets the next token, then the earlier.
The clock is injected; waiting uses the running event loop.

With a :class:`SharedState` (``serve`` always passes one: in memory for one worker, Redis for
several) the buckets are the shared store's, so every gateway replica draws on the same one. The
waiters of one process queue the same way, by priority then arrival, and one task per bucket
takes the shared tokens for them as they come due; across replicas, the first to take wins.
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
    """What the throttle did: admitted (``action`` None), or ``chain`` / ``reject`` / ``wait`` with details.

    ``waited_s`` is how long the request queued for a token (to the millisecond): set when a token
    came (``wait``) and when ``max_wait`` ran out first (``reject``); None when it did not queue.
    """

    admitted: bool
    action: str | None = None
    retry_after_s: float = 0.0
    waited_s: float | None = None


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
        self._pumps: dict[str, asyncio.Task[None]] = {}  # shared buckets: the task taking tokens for the waiters
        self._due: dict[str, float] = {}  # shared buckets: when the pump expects the next token

    def _bucket(self, key: str, spec: Throttle) -> TokenBucket:
        bucket = self._buckets.get(key)
        if bucket is None or (bucket.rate, bucket.burst) != (spec.rate, spec.burst):  # new, or reloaded
            bucket = self._buckets[key] = TokenBucket(spec.rate, spec.burst, at=self._clock())
        return bucket

    def tokens(self, key: str) -> float | None:
        """Tokens left in a bucket (None: not taken from yet; a shared bucket: as the shared store last said)."""
        if self._shared is not None:
            return self._shared.tokens("rule:" + key)
        bucket = self._buckets.get(key)
        return None if bucket is None else bucket.tokens

    async def admit(self, rule: Rule) -> Admission:
        """Take a token for a request matched by ``rule``, or say what its overflow setting does."""
        spec = rule.throttle
        if spec is None:
            return Admission(True)
        key = spec.bucket or rule.name
        if self._shared is not None:
            return await self._admit_shared(self._shared, key, spec, rule.priority)
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
            if _handed(fut):  # the token came in the loop turn max_wait ran out: it is this request's
                return Admission(True, "wait", waited_s=self._since(now))
            self._drop(key, fut)
            return Admission(False, "reject", retry_after_s=bucket.wait_s(self._clock()), waited_s=self._since(now))
        return Admission(True, "wait", waited_s=self._since(now))

    async def _admit_shared(self, shared: SharedState, key: str, spec: Throttle, priority: int) -> Admission:
        """:meth:`admit` on the shared bucket ``rule:<key>``; waiters queue here and :meth:`_pump` serves them."""
        t0, heap = self._clock(), self._waiters.setdefault(key, [])
        if not any(not w[2].done() for w in heap):  # nobody of this process queued ahead
            taken, wait = await shared.take("rule:" + key, spec.rate, spec.burst)
            if taken:
                return Admission(True)
        else:
            wait = max(0.0, self._due.get(key, t0) - t0)
        if spec.overflow == "chain":
            return Admission(False, "chain", retry_after_s=wait)
        if spec.overflow == "reject" or wait > spec.max_wait_s:
            return Admission(False, "reject", retry_after_s=max(wait, 1e-3))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(heap, (-priority, next(self._seq), fut))
        if key not in self._pumps:
            self._pumps[key] = asyncio.create_task(self._pump(shared, key, spec))
        try:
            await asyncio.wait_for(asyncio.shield(fut), max(0.0, spec.max_wait_s - (self._clock() - t0)))
        except TimeoutError:
            if _handed(fut):  # the pump took the shared token for it as max_wait ran out: it is this request's
                return Admission(True, "wait", waited_s=self._since(t0))
            self._drop(key, fut)
            return Admission(False, "reject", retry_after_s=max(0.0, self._due.get(key, 0.0) - self._clock()),
                             waited_s=self._since(t0))
        return Admission(True, "wait", waited_s=self._since(t0))

    def _since(self, t0: float) -> float:
        """Seconds from ``t0`` to now on the injected clock, to the millisecond (what the trace says was waited)."""
        return round(max(0.0, self._clock() - t0), 3)

    async def _pump(self, shared: SharedState, key: str, spec: Throttle) -> None:
        """Take the shared bucket's tokens as they come due and hand each to the best waiter, until none waits."""
        heap = self._waiters[key]
        try:
            while True:
                while heap and heap[0][2].done():  # gave up waiting
                    heapq.heappop(heap)
                if not heap:
                    return
                taken, wait = await shared.take("rule:" + key, spec.rate, spec.burst)
                while heap and heap[0][2].done():  # gave up during the take
                    heapq.heappop(heap)
                if taken and heap:
                    heapq.heappop(heap)[2].set_result(None)
                elif not taken:
                    self._due[key] = self._clock() + wait
                    await asyncio.sleep(wait)
        finally:
            self._pumps.pop(key, None)

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


def _handed(fut: asyncio.Future[None]) -> bool:
    """A waiter's future that was given its token (not one cancelled on giving up)."""
    return fut.done() and not fut.cancelled()
