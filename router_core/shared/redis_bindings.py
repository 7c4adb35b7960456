"""A local mirror of the shared bindings (session affinity), written to Redis in the background.

``bind`` answers from the mirror: the value it holds (TTL renewed), else the caller's value, now
held. Either way a write is queued for the next flush: ``nx`` (set in Redis unless it holds one,
TTL renewed; Redis answers what it holds) or ``set`` (``rebind``: overwrite). A replica that
binds a key first publishes it, so the others' mirrors learn it before their first request of
that session; when two replicas bind one key within a flush of each other, Redis keeps the first
and the other's mirror is corrected by the answer (``conflicts``). A replica that starts reads the
bindings Redis holds into its mirror (in the background); until then, and for a key it evicted,
it places a session it does not know anew, until Redis's answer to its write corrects it.

The mirror holds at most ``max_keys`` bindings (least recently used dropped). Pure bookkeeping.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["BindWrite", "BindingMirror"]

Mode = Literal["nx", "set"]


@dataclass(frozen=True, slots=True)
class BindWrite:
    """One queued write: ``key`` to ``value`` for ``ttl_ms`` (``nx``: unless Redis holds one)."""

    key: str
    value: str
    ttl_ms: int
    mode: Mode


class BindingMirror:
    """This replica's view of the bindings, and the writes it owes Redis."""

    def __init__(self, clock: Callable[[], float], *, max_keys: int = 100_000) -> None:
        self._clock = clock
        self.max_keys = max_keys
        self._held: OrderedDict[str, tuple[str, float]] = OrderedDict()  # key -> (value, expires at)
        self._writes: dict[str, Mode] = {}
        self.conflicts = 0  # keys Redis held for another replica's value when this one bound them

    @property
    def full(self) -> bool:
        """True when the mirror holds ``max_keys`` bindings."""
        return len(self._held) >= self.max_keys

    def get(self, key: str) -> str | None:
        """The value held for ``key`` (None: none, or expired)."""
        held = self._held.get(key)
        return held[0] if held is not None and held[1] > self._clock() else None

    def bind(self, key: str, value: str, ttl_s: float) -> str:
        """The value held (TTL renewed), else ``value``; an ``nx`` write queued either way."""
        current = self.get(key) or value
        self._hold(key, current, ttl_s)
        self._writes.setdefault(key, "nx")
        return current

    def rebind(self, key: str, value: str, ttl_s: float) -> None:
        """Hold ``value``; a ``set`` write queued."""
        self._hold(key, value, ttl_s)
        self._writes[key] = "set"

    def _hold(self, key: str, value: str, ttl_s: float) -> None:
        self._held[key] = (value, self._clock() + ttl_s)
        self._held.move_to_end(key)
        while len(self._held) > self.max_keys:
            old, _ = self._held.popitem(last=False)
            self._writes.pop(old, None)

    def drain(self) -> list[BindWrite]:
        """The queued writes for one flush, with the values and TTLs held now."""
        now, out = self._clock(), []
        for key, mode in self._writes.items():
            held = self._held.get(key)
            if held is not None and held[1] > now:
                out.append(BindWrite(key, held[0], max(1, int((held[1] - now) * 1e3)), mode))
        self._writes.clear()
        return out

    def confirmed(self, write: BindWrite, held: str) -> None:
        """Redis's answer to a write: it holds ``held`` (another replica's value when it bound the key first)."""
        if held != write.value and self.get(write.key) == write.value:
            self.conflicts += 1
            self._hold(write.key, held, write.ttl_ms / 1e3)

    def learned(self, key: str, value: str, ttl_ms: int) -> None:
        """Another replica bound or rebound ``key`` (what Redis holds now)."""
        self._hold(key, value, ttl_ms / 1e3)

    def warm(self, key: str, value: str, ttl_ms: int) -> None:
        """A binding read from Redis at start: held unless this replica has bound ``key`` meanwhile."""
        if key not in self._held and len(self._held) < self.max_keys:
            self._hold(key, value, ttl_ms / 1e3)

    def restore(self, writes: list[BindWrite]) -> None:
        """A flush that failed: its writes are owed again (a ``set`` queued meanwhile stays a ``set``)."""
        for w in writes:
            if w.key in self._held:
                mode = self._writes.get(w.key)
                self._writes[w.key] = "set" if "set" in (mode, w.mode) else "nx"
