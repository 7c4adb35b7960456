"""Token-bucket leases: a replica serves takes from tokens it took from the shared bucket ahead of need.

Each bucket (per ``floor``: a priority's reserve is its own lease) has, in this replica:

- ``held``: tokens already taken from the shared bucket and not used yet. A take uses one, with
  no I/O. When ``held`` falls to half the lease size a refill is *due*: the background refiller
  asks the shared bucket for ``size - held`` more (plus the takes that found nothing).
- ``debt``: tokens admitted *on credit* while the lease was empty and no refill had answered yet
  (at most ``size`` outstanding). The next refill charges them to the shared bucket whatever it
  holds: the bucket may go below zero, and then refuses everyone until it has refilled, so over
  time the replicas admit no more than one exact bucket would.
- ``empty_until``: the shared bucket said it had nothing (above the floor) until then; takes are
  refused locally until that time, with the wait it gave.

A take that finds no held token, no credit left and no known refusal returns None: the caller
waits for the refill in flight (bounded by its timeout) and then tries again.

The lease size is ``rate * lease_s`` tokens (100 ms of the bucket's rate by default), at most
``burst / (2 * replicas)``, at least 1. **Bound**: held tokens are really taken (they are never
over-admission, only reserved for this replica); credit is the one excess, at most ``size`` per
replica outstanding, so the shared bucket is overdrawn by at most ``size * replicas`` tokens at
any time and the admissions over any span ``T`` stay within ``burst + rate * T + size *
replicas``. Leases idle for ``idle_s`` give their held tokens back (and pay their debt).

Pure bookkeeping (clock injected, no I/O): :class:`router_core.shared.redis_refill.LeaseRefills`
does the Redis calls for :class:`router_core.shared.redis_shared.RedisShared` and applies their
results here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BucketLeases", "Lease", "Refill", "lease_size"]


def lease_size(rate: float, burst: float, replicas: int, lease_s: float) -> int:
    """Tokens a lease holds when full: ``rate * lease_s``, at most ``burst / (2 * replicas)``, at least 1."""
    return max(1, min(math.ceil(rate * lease_s), math.floor(burst / (2 * max(1, replicas)))))


@dataclass(slots=True, eq=False)
class Lease:
    """One bucket's lease in this replica (see the module docstring)."""

    bucket: str
    rate: float
    burst: float
    floor: float
    size: int
    held: int = 0
    debt: int = 0  # admitted on credit, not yet sent to be charged
    sending: int = 0  # credit in the refill in flight
    short: int = 0  # takes that found nothing since the last refill was asked for
    empty_until: float = -math.inf
    in_flight: bool = False
    used_at: float = 0.0
    left: float | None = None  # the shared bucket's tokens after the last refill (for state pages)


@dataclass(frozen=True, slots=True)
class Refill:
    """One row of a refill round: charge ``debt`` (negative: give back), then take up to ``want``."""

    lease: Lease
    debt: int
    want: int


class BucketLeases:
    """Every bucket's lease of one replica.

    Args:
        clock: Monotonic seconds (injected).
        lease_s: Seconds of a bucket's rate a full lease holds.
        idle_s: A lease unused this long gives its tokens back.
    """

    def __init__(self, clock: Callable[[], float], *, lease_s: float = 0.1, idle_s: float = 2.0) -> None:
        self._clock = clock
        self.lease_s, self.idle_s = lease_s, idle_s
        self.leases: dict[tuple[str, float], Lease] = {}
        self._due: dict[tuple[str, float], Lease] = {}
        self.credited = 0  # tokens admitted on credit (counted once charged or not)
        self.overdrawn = 0  # refills that left the shared bucket below zero (credit it did not have)

    @property
    def due(self) -> bool:
        """True when a refill should be sent."""
        return bool(self._due)

    def take(self, bucket: str, rate: float, burst: float, floor: float, replicas: int) -> tuple[bool, float] | None:
        """``(taken, seconds until one is there)`` decided locally, or None: wait for the refill, then retry."""
        now, key = self._clock(), (bucket, floor)
        lease = self.leases.get(key)
        if lease is None:
            lease = self.leases[key] = Lease(bucket, rate, burst, floor, lease_size(rate, burst, replicas,
                                                                                    self.lease_s))
        elif lease.rate != rate or lease.burst != burst:  # reloaded
            lease.rate, lease.burst, lease.size = rate, burst, lease_size(rate, burst, replicas, self.lease_s)
        lease.used_at = now
        if lease.held >= 1:
            lease.held -= 1
            self._check(lease, now)
            return True, 0.0
        if now < lease.empty_until:
            return False, lease.empty_until - now
        if lease.debt + lease.sending < lease.size:
            lease.debt += 1
            self.credited += 1
            self._check(lease, now)
            return True, 0.0
        lease.short += 1
        if not lease.in_flight:
            self._due[key] = lease
        return None

    def tokens(self, bucket: str) -> float | None:
        """The shared bucket's tokens as the last refill left them, plus those this lease holds (None: none yet)."""
        lease = self.leases.get((bucket, 0.0))
        return None if lease is None or lease.left is None else lease.left + lease.held

    def _check(self, lease: Lease, now: float) -> None:
        if not lease.in_flight and lease.held <= lease.size // 2 and now >= lease.empty_until:
            self._due[(lease.bucket, lease.floor)] = lease

    def requests(self) -> list[Refill]:
        """The due refills, marked in flight (their credit moves to ``sending``)."""
        out = []
        for lease in self._due.values():
            if lease.in_flight:
                continue
            want = max(0, lease.size - lease.held + lease.short)
            out.append(Refill(lease, lease.debt, want))
            lease.sending += lease.debt
            lease.debt, lease.short, lease.in_flight = 0, 0, True
        self._due.clear()
        return out

    def granted(self, refill: Refill, granted: int, wait_s: float, tokens_left: float) -> None:
        """Apply a refill's answer: ``granted`` tokens, and the wait for more when fewer than wanted."""
        lease, now = refill.lease, self._clock()
        lease.sending -= refill.debt
        lease.held += granted
        lease.in_flight, lease.short = False, 0  # the takes that came short meanwhile try again, and count again
        lease.left = tokens_left
        if tokens_left < 0 and refill.debt > 0:
            self.overdrawn += 1
        if granted < refill.want:
            lease.empty_until = now + wait_s

    def failed(self, refill: Refill) -> None:
        """A refill that got no answer: its credit is charged with the next one."""
        lease = refill.lease
        lease.sending -= refill.debt
        lease.debt += refill.debt
        lease.in_flight = False

    def sweep(self) -> list[Refill]:
        """Drop the leases idle for ``idle_s`` (not refused, owing nothing); rows giving back their tokens."""
        now, out = self._clock(), []
        for key, lease in list(self.leases.items()):
            if lease.in_flight or lease.debt or key in self._due or now - lease.used_at < self.idle_s \
                    or now < lease.empty_until:
                continue  # credit is charged by a refill (whose answer sets the wait) before a lease goes
            del self.leases[key]
            if lease.held:
                out.append(Refill(lease, -lease.held, 0))
        return out

    def release(self) -> list[Refill]:
        """Drop every lease; rows giving back their held tokens and paying their debt (at shutdown)."""
        out = [Refill(lease, lease.debt - lease.held, 0) for lease in self.leases.values()
               if not lease.in_flight and (lease.held or lease.debt)]
        self.clear()
        return out

    def clear(self) -> None:
        """Forget every lease (the shared store went away: what it lent is not worth keeping)."""
        self.leases.clear()
        self._due.clear()
