"""The router's breakers on itself (seed 003 §4.3): static mode on slow decisions, safe mode on misroutes.

*Static*: ``slow_count`` decisions in a row slower than ``slow_ms`` switch to preset weights and
round robin (no scoring) until ``fast_count`` in a row are faster than ``fast_ms``. *Safe*: the
share of ``correct: false`` feedback in a sliding window above ``misroute_enter`` for
``misroute_enter_s`` sends every ``auto`` request to ``safe_model`` until the share stays below
``misroute_exit`` for ``misroute_exit_s``. Safe wins over static. Every switch is a
:class:`schemas.records.RouterEvent` handed to ``on_event``. The clock is injected.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from router_core.framework.types import Picked
from schemas.common import RoutingMode
from schemas.config.economics import RouterModeSettings
from schemas.records import RouterEvent

__all__ = ["ModeChoice", "RouterModes", "static_order", "static_pick"]


@dataclass(frozen=True, slots=True)
class ModeChoice:
    """What a decision needs of the router's mode: which, the round-robin position, the preset weights."""

    mode: RoutingMode
    seq: int = 0
    safe_model: str | None = None
    weights: Mapping[str, int] = field(default_factory=dict)
    reason: str = ""


def static_order(ids: Sequence[str], weights: Sequence[int], seq: int) -> list[str]:
    """Weighted round robin: the ``seq``-th slot's instance first, then the others in ring order.

    Slots interleave each instance's ``weight`` turns (instance ``i``'s ``k``-th turn sits at
    ``k / weight``), so weights 3:1 give a a b a, not a a a b.
    """
    if not ids:
        return []
    slots = sorted(((k / w, n) for n, w in enumerate(weights) for k in range(w)))
    first = slots[seq % len(slots)][1]
    return [ids[(first + i) % len(ids)] for i in range(len(ids))]


def static_pick(ids: Sequence[str], models: Sequence[str], choice: ModeChoice) -> Picked:
    """Static mode's pick: weighted round robin over the feasible ``ids`` by their model's preset weight."""
    weights = [choice.weights.get(m, 1) for m in models]
    order = static_order(ids, weights, choice.seq)
    total = sum(weights)
    prob = weights[list(ids).index(order[0])] / total if order else 1.0
    return Picked(order, f"static mode: weighted round robin, turn {choice.seq}", prob)


class RouterModes:
    """Holds the router's mode; fed decision durations and feedback verdicts.

    Args:
        settings: Thresholds and the safe model.
        clock: Monotonic seconds (injected).
        wall: UTC clock for event timestamps.
        on_event: Takes each mode switch as a router event.
        router_version: Stamped on events.
    """

    def __init__(self, settings: RouterModeSettings, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC),
                 on_event: Callable[[RouterEvent], None] | None = None, router_version: str | None = None) -> None:
        self.settings = settings
        self._clock, self._wall, self._on_event, self._version = clock, wall, on_event, router_version
        self._slow = self._fast = 0
        self.is_static = False
        self.is_safe = False
        self._verdicts: deque[tuple[float, bool]] = deque()  # (at, misrouted)
        self._misroutes = 0
        self._above_since: float | None = None
        self._below_since: float | None = None
        self.seq = 0  # round-robin position, one per static decision
        self.switches: deque[RouterEvent] = deque(maxlen=50)

    @property
    def mode(self) -> RoutingMode:
        """The mode the next decision runs in."""
        if self.is_safe:
            return RoutingMode.SAFE
        return RoutingMode.STATIC if self.is_static else RoutingMode.NORMAL

    def choice(self) -> ModeChoice | None:
        """The mode for the next decision (None: normal); a static one takes the next round-robin turn."""
        got = self.peek()
        if got is not None and got.mode is RoutingMode.STATIC:
            self.seq = got.seq
        return got

    def peek(self) -> ModeChoice | None:
        """What :meth:`choice` would answer, the turn not taken: a dry run decides as the next request would."""
        if self.is_safe:
            return ModeChoice(RoutingMode.SAFE, safe_model=self.settings.safe_model,
                              reason=f"router in safe mode: every auto request to {self.settings.safe_model}")
        if not self.is_static:
            return None
        return ModeChoice(RoutingMode.STATIC, seq=self.seq + 1, weights=self.settings.static_weights,
                          reason="router in static mode: preset weights, round robin")

    def observe_decision(self, ms: float) -> None:
        """Count one decision's duration towards entering or leaving static mode."""
        s = self.settings
        if not s.enabled:
            return
        if not self.is_static:
            self._slow = self._slow + 1 if ms > s.slow_ms else 0
            if self._slow >= s.slow_count:
                self.is_static, self._fast = True, 0
                self._switch(RoutingMode.STATIC, f"{self._slow} decisions in a row slower than {s.slow_ms:g} ms",
                             ms)
            return
        self._fast = self._fast + 1 if ms < s.fast_ms else 0
        if self._fast >= s.fast_count:
            self.is_static, self._slow = False, 0
            self._switch(RoutingMode.NORMAL, f"{self._fast} decisions in a row faster than {s.fast_ms:g} ms", ms)

    def observe_feedback(self, correct: bool) -> None:
        """Count one feedback verdict into the misroute share, then re-check safe mode."""
        self._verdicts.append((self._clock(), not correct))
        self._misroutes += not correct
        self.tick()

    def misroute_rate(self) -> float | None:
        """The misroute share in the window (None: fewer than ``min_feedback`` verdicts)."""
        cutoff = self._clock() - self.settings.misroute_window_s
        while self._verdicts and self._verdicts[0][0] < cutoff:
            self._misroutes -= self._verdicts.popleft()[1]
        n = len(self._verdicts)
        return None if n < self.settings.min_feedback else self._misroutes / n

    def tick(self) -> None:
        """Enter or leave safe mode as the misroute share has held (call before deciding, and on feedback)."""
        s = self.settings
        if not s.enabled or s.safe_model is None:
            return
        now, rate = self._clock(), self.misroute_rate()
        if not self.is_safe:
            if rate is None or rate <= s.misroute_enter:
                self._above_since = None
                return
            self._above_since = now if self._above_since is None else self._above_since
            if now - self._above_since >= s.misroute_enter_s:
                self.is_safe, self._below_since = True, None
                self._switch(RoutingMode.SAFE, f"misroute share {rate:.0%} above {s.misroute_enter:.0%} for "
                             f"{s.misroute_enter_s:g} s; routing to {s.safe_model}", rate)
            return
        if rate is not None and rate >= s.misroute_exit:
            self._below_since = None
            return
        self._below_since = now if self._below_since is None else self._below_since
        if now - self._below_since >= s.misroute_exit_s:
            self.is_safe, self._above_since = False, None
            self._switch(self.mode, f"misroute share {rate or 0:.0%} below {s.misroute_exit:.0%} for "
                         f"{s.misroute_exit_s:g} s", rate)

    def state(self) -> dict[str, object]:
        """The ``router_mode`` body of ``GET /v1/router/state``."""
        rate = self.misroute_rate()
        return {"mode": self.mode.value, "static": self.is_static, "safe": self.is_safe,
                "safe_model": self.settings.safe_model, "slow_in_a_row": self._slow, "fast_in_a_row": self._fast,
                "misroute_rate": None if rate is None else round(rate, 4), "feedback_in_window": len(self._verdicts),
                "switches": [e.model_dump(mode="json") for e in self.switches]}

    def _switch(self, to: RoutingMode, why: str, value: float | None) -> None:
        event = RouterEvent(event_id="evt_" + uuid.uuid4().hex[:20], ts=self._wall(), kind="router_mode",
                            severity="info" if to is RoutingMode.NORMAL else "warning",
                            model=self.settings.safe_model if to is RoutingMode.SAFE else None,
                            message=f"router mode {to.value}: {why}", value=value, router_version=self._version)
        self.switches.append(event)
        if self._on_event is not None:
            self._on_event(event)
