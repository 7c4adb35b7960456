"""Session affinity (seed 000): a session key bound to one instance by MurmurHash3, loads bounded.

Placement is consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam 2018): walk
the ring clockwise from ``mmh3(key)`` to the first instance whose load, plus this session, stays
within ``ceil(c * (total + 1) / n)``. The binding is kept in :class:`SharedState` (``bind``: the
first replica's placement wins; ``rebind`` when the router had to move the session), so replicas
agree. Whether the bound instance is still feasible is the router's to say, in ``decide``.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from typing import Any

import mmh3

from router_core.shared.base import SharedState
from router_core.wire_bytes import wire_bytes
from schemas.config.economics import AffinitySettings
from schemas.trace import Violation

__all__ = ["AffinityBinder", "BoundedRing", "affine", "session_key"]


def session_key(settings: AffinitySettings, headers: Mapping[str, str], body: Any) -> str | None:
    """The request's session key: the header, else ``metadata.<field>`` of the body (None: none)."""
    if settings.header is not None and (value := headers.get(settings.header)):
        return value[:256]
    if settings.metadata_field is not None and isinstance(body, dict):
        meta = body.get("metadata")
        if isinstance(meta, dict) and isinstance(value := meta.get(settings.metadata_field), str | int) and value:
            return str(value)[:256]
    return None


def affine(order: list[str], bound: str, violations: Mapping[str, Sequence[Violation]]) -> tuple[list[str], str]:
    """``order`` with the bound instance first while it is feasible, and the affinity step's reason."""
    if bound in order:
        return [bound] + [i for i in order if i != bound], f"session kept on {bound}"
    why = "; ".join(v.reason for v in violations.get(bound, ())) or "not a candidate of this request"
    return order, f"session moved from {bound} ({why}) to {order[0] if order else 'no instance'}"


class BoundedRing:
    """A hash ring over instance ids, ``vnodes`` points each; placement under a load cap ``c``."""

    def __init__(self, ids: Sequence[str], *, vnodes: int = 64, load_factor: float = 1.25) -> None:
        self.ids = tuple(ids)
        self.load_factor = load_factor
        points = sorted((mmh3.hash(f"{iid}#{v}", signed=False), iid) for iid in self.ids for v in range(vnodes))
        self._hashes = [h for h, _ in points]
        self._owners = [iid for _, iid in points]

    def capacity(self, loads: Mapping[str, float]) -> int:
        """The most sessions (load units) one instance may hold once one more is placed."""
        total = sum(loads.get(i, 0.0) for i in self.ids)
        return max(1, math.ceil(self.load_factor * (total + 1) / max(1, len(self.ids))))

    def place(self, key: str, loads: Mapping[str, float]) -> str | None:
        """The first instance clockwise from ``key`` with room under the cap (None: empty ring)."""
        if not self._owners:
            return None
        cap, n = self.capacity(loads), len(self._owners)
        # the key's bytes: a header byte that is not UTF-8 crashed mmh3 as a string (router_core.wire_bytes)
        start = bisect.bisect_left(self._hashes, mmh3.hash(wire_bytes(key), signed=False)) % n
        for i in range(n):
            iid = self._owners[(start + i) % n]
            if loads.get(iid, 0.0) + 1 <= cap:
                return iid
        return self._owners[start]  # unreachable while cap >= average + 1


class AffinityBinder:
    """Binds session keys to instances in shared state (``affinity:<key>``), rings cached per instance set."""

    def __init__(self, settings: AffinitySettings, shared: SharedState) -> None:
        self.settings = settings
        self.shared = shared
        self._rings: dict[tuple[str, ...], BoundedRing] = {}
        self.moves = 0

    def ring(self, ids: Sequence[str]) -> BoundedRing:
        """The ring of this instance set (built once)."""
        key = tuple(sorted(ids))
        ring = self._rings.get(key)
        if ring is None:
            if len(self._rings) > 64:
                self._rings.clear()
            ring = self._rings[key] = BoundedRing(key, vnodes=self.settings.vnodes,
                                                  load_factor=self.settings.load_factor)
        return ring

    async def bound(self, key: str, ids: Sequence[str], loads: Mapping[str, float]) -> str | None:
        """The instance ``key`` is bound to: its binding, else a new bounded-load placement among ``ids``."""
        placed = self.ring(ids).place(key, loads)
        if placed is None:
            return None
        return await self.shared.bind(f"affinity:{key}", placed, self.settings.ttl_s)

    def peek(self, key: str, ids: Sequence[str], loads: Mapping[str, float]) -> str | None:
        """What :meth:`bound` would answer, binding nothing (a dry run): the binding held, else the placement."""
        placed = self.ring(ids).place(key, loads)
        if placed is None:
            return None
        return self.shared.held(f"affinity:{key}") or placed

    async def move(self, key: str, instance: str) -> None:
        """Rebind ``key`` to ``instance`` (its bound instance was not feasible)."""
        self.moves += 1
        await self.shared.rebind(f"affinity:{key}", instance, self.settings.ttl_s)
