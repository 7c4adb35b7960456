"""The gateway's side of the breakers: the sweep loop, transitions out (metrics, events, replicas) and in.

Each transition the board queues becomes ``routelens_breaker_state{scope,name}``, a
:class:`schemas.records.RouterEvent` (kind ``breaker``; through the hooks' optional
``record_event``, and the last ones kept for ``GET /v1/router/state``), and a message on the
shared ``breakers`` channel; messages from other replicas are applied to this board.

The channel carries a state too: each breaker not closed is kept under ``scope:name`` (its last
transition, for ``open_s``, or a 429's longer hold, + :data:`KEEP_SLACK_S`; renewed by its next
transition, dropped when it closes), so a replica that starts, or reconnects to Redis, applies the
breakers open elsewhere (as a remote transition, open since the age it was kept at), not only the
transitions after it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any

from router_core.resilience.breaker import BreakerState, Transition
from router_core.resilience.breakers import BreakerBoard
from router_core.shared.base import SharedState
from schemas.records import RouterEvent

__all__ = ["CHANNEL", "KEEP_SLACK_S", "BreakerHub"]

CHANNEL = "breakers"
KEEP_SLACK_S = 1.0  # a breaker's kept state outlives its open_s by this much (a live replica renews it at half-open)
log = logging.getLogger(__name__)


class BreakerHub:
    """Connects one board to metrics, events and the other replicas.

    Args:
        board: This gateway's breakers.
        shared: Where transitions are published and received.
        set_gauge: ``(scope, name, state value)`` for ``routelens_breaker_state``.
        emit_event: Hands a router event over (None: kept in memory only).
        wall: UTC clock of event timestamps.
        router_version: Stamped on events.
    """

    def __init__(self, board: BreakerBoard, shared: SharedState, *, set_gauge: Callable[[str, str, int], None],
                 emit_event: Callable[[RouterEvent], Any] | None, wall: Callable[[], datetime],
                 router_version: str | None = None) -> None:
        self.board, self.shared = board, shared
        self.origin = uuid.uuid4().hex[:12]
        self._gauge, self._emit, self._wall, self._version = set_gauge, emit_event, wall, router_version
        self.events: deque[dict[str, Any]] = deque(maxlen=50)
        for b in board.breakers():
            set_gauge(b.scope, b.name, int(b.state))
        shared.subscribe(CHANNEL, self._received)

    def _received(self, message: dict[str, Any]) -> None:
        if message.get("origin") == self.origin:
            return  # our own, delivered back (MemoryShared delivers inline)
        if self.board.apply(message):
            self._record(self.board.take_transitions())

    def _record(self, transitions: list[Transition]) -> None:
        for t in transitions:
            self._gauge(t.scope, t.name, int(t.to_state))
            event = RouterEvent(
                event_id="evt_" + uuid.uuid4().hex[:20], ts=self._wall(), kind="breaker",
                severity="warning" if t.to_state is BreakerState.OPEN else "info",
                instance=t.name if t.scope == "instance" else None, model=t.name if t.scope == "model" else None,
                message=f"{t.scope} breaker {t.name}: {t.from_state.label} -> {t.to_state.label} ({t.reason})"[:2000],
                value=float(t.to_state), router_version=self._version)
            self.events.append(event.model_dump(mode="json"))
            if self._emit is not None:
                try:
                    self._emit(event)
                except Exception:  # an event sink problem never fails a request
                    log.exception("breaker event not emitted")

    async def drain(self) -> None:
        """Record and publish the transitions the board queued (call after attempts and sweeps)."""
        out = self.board.take_transitions()
        if not out:
            return
        self._record(out)
        for t in out:
            if not t.remote:
                b = self.board.get(t.scope, t.name)
                keep_s = 0.0 if t.to_state is BreakerState.CLOSED or b is None else \
                    max(b.open_s, t.hold_s or 0.0) + KEEP_SLACK_S
                try:
                    await self.shared.publish(CHANNEL, t.to_message(self.origin), keep=f"{t.scope}:{t.name}",
                                              keep_s=keep_s)
                except Exception:  # the shared store is down: this replica's state still holds
                    log.warning("breaker transition of %s/%s not published", t.scope, t.name)

    async def run(self, interval_s: float = 0.1) -> None:
        """Sweep the board every ``interval_s`` (half-open timing, stalls, held error shares)."""
        while True:
            await asyncio.sleep(interval_s)
            self.board.sweep()
            await self.drain()

    async def close(self, scope: str, name: str, by: str) -> bool:
        """An operator's close; False when no such breaker."""
        found = self.board.close(scope, name, f"closed by an operator ({by})") is not None
        await self.drain()
        return found
