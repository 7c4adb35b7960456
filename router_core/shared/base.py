"""One interface for the state gateway replicas share, and its one-process implementation.

Breaker transitions are *published* and every replica applies them to its local view; token
buckets are taken from; counters (budget spend) are added to and read; bindings (session
affinity) are set if absent. :class:`MemoryShared` does each exactly, in one process. The Redis
implementation (:mod:`router_core.shared.redis_shared`) answers every call the request path
awaits from local state kept in step with Redis in the background, so its answers are exact up to
documented bounds: a bucket admits at most ``lease size * replicas`` tokens more than one exact
bucket would, a counter's total lags the other replicas' adds by one flush interval, a binding
made by another replica is seen once its publication arrives. While Redis is down it works on
this process's own state and says so (``healthy``, ``problem``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

__all__ = ["Handler", "MemoryShared", "SharedState"]

_MAX_CLAIMS = 200_000  # claims a process remembers (each about 150 bytes)
_MAX_BINDINGS = 100_000  # bindings (session affinity) a process holds, the least recently bound dropped first
# Buckets held before the full ones are dropped (a full bucket is the same as none); one per client key
# otherwise, for ever. The map is scanned when it has doubled since the last scan or, past this size,
# once a _PRUNE_EVERY_S: never on every request.
_PRUNE_BUCKETS = 10_000
_PRUNE_EVERY_S = 60.0

Handler = Callable[[dict[str, Any]], None]


class SharedState(Protocol):
    """State shared between gateway replicas (all methods are safe to call on the event loop)."""

    backend: str
    """``memory`` or ``redis`` (``GET /v1/router/state`` → ``shared``, the shared-state metrics)."""
    replicas: int
    """The replicas sharing it (1 in memory): what a bucket's rate and an outage's budget estimate divide by."""
    fallbacks: int
    """Calls answered by this process's own state because the shared store was down or slow (0 in memory)."""

    @property
    def replica_id(self) -> str | None:
        """This replica's id among those sharing a Redis (None in memory: there are no others)."""
        ...

    @property
    def healthy(self) -> bool:
        """False while the shared store is unreachable (state is then this process's own)."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the shared store is not in use (None: it is)."""
        ...

    async def take(self, bucket: str, rate: float, burst: float, *, floor: float = 0.0) -> tuple[bool, float]:
        """Take one token from ``bucket`` (``rate``/s up to ``burst``); ``(taken, seconds until one is there)``.

        ``floor`` tokens are left for others: the token is taken only when ``floor`` remain after it
        (priority shedding keeps a reserve for higher priorities this way).
        """
        ...

    def tokens(self, bucket: str) -> float | None:
        """Tokens in ``bucket`` as this replica last saw them (None: not taken from yet); for state pages."""
        ...

    async def add(self, counter: str, amount: float, ttl_s: float) -> float:
        """Add ``amount`` to ``counter`` (created with ``ttl_s``); return its new total (as this replica knows it)."""
        ...

    async def get(self, counter: str) -> float:
        """The counter's value (0 when absent or expired); may read the shared store (for background refreshes)."""
        ...

    async def bind(self, key: str, value: str, ttl_s: float) -> str:
        """Set ``key`` to ``value`` unless it holds one; return what it holds now (``ttl_s`` renewed)."""
        ...

    async def rebind(self, key: str, value: str, ttl_s: float) -> None:
        """Set ``key`` to ``value`` whatever it holds."""
        ...

    def held(self, key: str) -> str | None:
        """The value ``key`` holds as :meth:`bind` reads it, nothing renewed or written (None: none held)."""
        ...

    async def claim(self, key: str, ttl_s: float) -> bool:
        """Take ``key`` once among all replicas (set if absent, awaited): True for the one that took it.

        Unlike :meth:`bind` (a mirror written in the background, for hot paths), the answer is
        the shared store's own; while it is unreachable, this replica's alone.
        """
        ...

    async def unclaim(self, key: str) -> None:
        """Give ``key`` back: the next :meth:`claim` takes it."""
        ...

    async def publish(self, channel: str, message: dict[str, Any], *, keep: str | None = None,
                      keep_s: float = 0.0) -> None:
        """Send ``message`` to every replica's handlers of ``channel`` (this one's too).

        ``keep``: the message also stands as ``channel``'s state under that key for ``keep_s``
        seconds (``keep_s`` 0: no state under that key any more), and a replica that starts or
        reconnects later receives each message so kept, with ``age_s`` (seconds since it was kept)
        added: a state, not only its transitions (open breakers).
        """
        ...

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` (and those kept, see :meth:`publish`)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class MemoryShared:
    """:class:`SharedState` for one process: dicts, an injected monotonic clock, handlers called inline."""

    backend = "memory"
    replicas = 1
    fallbacks = 0
    replica_id = None

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, max_bindings: int = _MAX_BINDINGS,
                 prune_buckets: int = _PRUNE_BUCKETS) -> None:
        self._clock = clock
        self._max_bindings = max_bindings  # as the Redis backend's mirror: one per session seen, else unbounded
        self._buckets: dict[str, tuple[float, float, float]] = {}  # bucket -> (tokens, at, full again at)
        self._prune_buckets = prune_buckets
        self._prune_at = prune_buckets  # the size at which the buckets are scanned next
        self._prune_after = 0.0  # ... or past prune_buckets, the time
        self.bucket_scans = 0  # scans of the buckets for full ones (each drops them)
        self._counters: dict[str, tuple[float, float]] = {}  # counter -> (value, expires at)
        self._bindings: dict[str, tuple[str, float]] = {}  # key -> (value, expires at), least recently bound first
        self._claims: dict[str, float] = {}  # key -> expires at (the newest last; at most _MAX_CLAIMS)
        self._handlers: dict[str, list[Handler]] = {}
        self._kept: dict[tuple[str, str], tuple[dict[str, Any], float, float]] = {}  # -> (message, kept at, expires)

    @property
    def healthy(self) -> bool:
        """Always: there is nothing to reach."""
        return True

    @property
    def problem(self) -> str | None:
        """Never one."""
        return None

    async def take(self, bucket: str, rate: float, burst: float, *, floor: float = 0.0) -> tuple[bool, float]:
        """Token bucket, refilled lazily."""
        return self.take_now(bucket, rate, burst, floor=floor)

    def take_now(self, bucket: str, rate: float, burst: float, *, floor: float = 0.0) -> tuple[bool, float]:
        """:meth:`take` without awaiting (the Redis implementation's local fallback uses it too)."""
        now = self._clock()
        held = self._buckets.get(bucket)
        tokens, at = (burst, now) if held is None else (held[0], held[1])
        tokens = min(burst, tokens + max(0.0, now - at) * rate)
        taken = tokens - 1.0 >= floor
        if taken:
            tokens -= 1.0
        self._buckets[bucket] = (tokens, now, now + (burst - tokens) / rate)
        size = len(self._buckets)
        if size > self._prune_at or (size > self._prune_buckets and now >= self._prune_after):
            self._prune(now)
        return (True, 0.0) if taken else (False, (1.0 + floor - tokens) / rate)

    def _prune(self, now: float) -> None:
        """Drop the buckets full again; the next scan once the map has doubled, or after ``_PRUNE_EVERY_S``.

        A scan costs the map's size, and comes after at least as many takes made it grow (or a minute
        passed): amortised, a constant per take.
        """
        self.bucket_scans += 1
        for name in [name for name, (_, _, full_at) in self._buckets.items() if full_at <= now]:
            del self._buckets[name]
        self._prune_at = max(self._prune_buckets, 2 * len(self._buckets))
        self._prune_after = now + _PRUNE_EVERY_S

    def tokens(self, bucket: str) -> float | None:
        """Tokens in ``bucket`` as of its last take (None: never taken from, or full again and dropped); for pages."""
        held = self._buckets.get(bucket)
        return None if held is None else held[0]

    async def add(self, counter: str, amount: float, ttl_s: float) -> float:
        """Add to a counter that expires ``ttl_s`` after its creation."""
        now = self._clock()
        value, expires = self._counters.get(counter, (0.0, now + ttl_s))
        if expires <= now:
            value, expires = 0.0, now + ttl_s
        self._counters[counter] = (value + amount, expires)
        return value + amount

    async def get(self, counter: str) -> float:
        """The counter, 0 once expired."""
        value, expires = self._counters.get(counter, (0.0, 0.0))
        return value if expires > self._clock() else 0.0

    async def bind(self, key: str, value: str, ttl_s: float) -> str:
        """Set if absent (or expired); renew the TTL."""
        now = self._clock()
        held = self._bindings.get(key)
        current = held[0] if held is not None and held[1] > now else value
        self._hold(key, current, now + ttl_s)
        return current

    async def rebind(self, key: str, value: str, ttl_s: float) -> None:
        """Overwrite."""
        self._hold(key, value, self._clock() + ttl_s)

    def held(self, key: str) -> str | None:
        """The binding, unless expired."""
        held = self._bindings.get(key)
        return held[0] if held is not None and held[1] > self._clock() else None

    def _hold(self, key: str, value: str, expires: float) -> None:
        """Hold a binding as the most recent; past ``max_bindings``, the least recently bound goes."""
        self._bindings.pop(key, None)
        self._bindings[key] = (value, expires)
        if len(self._bindings) > self._max_bindings:
            del self._bindings[next(iter(self._bindings))]

    async def claim(self, key: str, ttl_s: float) -> bool:
        """Set if absent (or expired)."""
        now = self._clock()
        held = self._claims.get(key)
        if held is not None and held > now:
            return False
        self._claims[key] = now + ttl_s
        if len(self._claims) > _MAX_CLAIMS:  # the oldest go first (insertion order)
            for old in list(itertools.islice(self._claims, len(self._claims) - _MAX_CLAIMS)):
                del self._claims[old]
        return True

    async def unclaim(self, key: str) -> None:
        """Forget."""
        self._claims.pop(key, None)

    def claims_left(self, keys: Iterable[str] | None = None) -> list[tuple[str, float]]:
        """``(key, seconds left)`` of the claims held (of ``keys`` only, when given), expired ones left out."""
        now, claims = self._clock(), self._claims
        held = ((k, claims.get(k, 0.0)) for k in keys) if keys is not None else claims.items()
        return [(k, at - now) for k, at in held if at > now]

    async def publish(self, channel: str, message: dict[str, Any], *, keep: str | None = None,
                      keep_s: float = 0.0) -> None:
        """Deliver to this process's handlers at once; ``keep``: to handlers subscribed later too."""
        if keep is not None:
            now = self._clock()
            if keep_s > 0:
                self._kept[(channel, keep)] = (message, now, now + keep_s)
            else:
                self._kept.pop((channel, keep), None)
        for handler in self._handlers.get(channel, ()):
            handler(message)

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Register a handler; it receives the messages kept on ``channel`` at once."""
        self._handlers.setdefault(channel, []).append(handler)
        now = self._clock()
        for (ch, _), (message, at, expires) in list(self._kept.items()):
            if ch == channel and expires > now:
                handler({**message, "age_s": now - at})

    async def close(self) -> None:
        """Nothing to release."""
