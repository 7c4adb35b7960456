"""State the gateway replicas share: one interface, a one-process and a Redis implementation.

::

    base.py            SharedState (the protocol) and MemoryShared (one process, exact)
    redis_shared.py    RedisShared: the same calls answered from local state kept in step with Redis
    redis_background.py  RedisBackground: RedisShared's refill and write rounds, and the tasks that run them
    redis_store.py     RedisStore: the connection, its Lua scripts and pipelines
    redis_scripts.py   the Lua scripts themselves (grant, add, restore, bind, presence, keep, kept)
    redis_lease.py     token-bucket leases taken ahead of need
    redis_refill.py    LeaseRefills: the leases' refill rounds, and takes that wait for one
    redis_counters.py  counter adds batched between flushes
    redis_bindings.py  the local mirror of set-if-absent bindings
    redis_warm.py      the mirror filled from Redis at start
    redis_kept.py      messages kept as a channel's state (open breakers), read by replicas that start later
    redis_claims.py    claims written to Redis again when it comes back (a restarted Redis is empty)
    redis_totals.py    counters' known totals written back into a restarted (empty) Redis
    wiring.py          build_shared (the configured state) and SharedCollector (its series)

The state machines that keep their state here (breakers, budgets, affinity, throttles) are in
:mod:`router_core.resilience` and :mod:`router_core.rules`; nothing here knows them. The Redis
client loads on first use of :class:`RedisShared`, :class:`SharedCollector` or
:func:`build_shared` (PEP 562).
"""

from typing import TYPE_CHECKING

from router_core.lazy import lazy_getattr
from router_core.shared.base import Handler, MemoryShared, SharedState

if TYPE_CHECKING:
    from router_core.shared.redis_shared import RedisShared
    from router_core.shared.wiring import SharedCollector, build_shared

_LAZY = {"RedisShared": "router_core.shared.redis_shared", "SharedCollector": "router_core.shared.wiring",
         "build_shared": "router_core.shared.wiring"}

__all__ = ["Handler", "MemoryShared", "RedisShared", "SharedCollector", "SharedState", "build_shared"]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
