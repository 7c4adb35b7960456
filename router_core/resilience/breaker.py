"""One circuit breaker: closed, open, half-open, with the reason and time of every transition.

The breaker is a pure state machine over an injected monotonic clock; what trips it (consecutive
failures, an error share, a stall) is decided by :class:`router_core.resilience.breakers.BreakerBoard`,
which calls :meth:`Breaker.open`. Half-open lets ``trial_requests`` attempts out at once; each one
that passes counts, one that fails reopens it, ``close_after`` consecutive passes close it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

__all__ = ["Breaker", "BreakerState", "Scope", "Transition"]

Scope = Literal["instance", "model", "zone"]


class BreakerState(IntEnum):
    """The gauge values of ``routelens_breaker_state``."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2

    @property
    def label(self) -> str:
        """``closed``, ``half_open`` or ``open``."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of one breaker (published to the other replicas, emitted as a router event)."""

    scope: Scope
    name: str
    from_state: BreakerState
    to_state: BreakerState
    reason: str
    at: float  # the board's monotonic clock
    remote: bool = False  # applied from another replica's message
    hold_s: float | None = None  # an upstream 429's hold: open this long, not open_s

    def to_message(self, origin: str) -> dict[str, Any]:
        """The ``breakers`` channel message (with ``hold_s`` for a 429's hold, which every replica keeps)."""
        message: dict[str, Any] = {"origin": origin, "scope": self.scope, "name": self.name,
                                   "from": self.from_state.label, "to": self.to_state.label, "reason": self.reason}
        if self.hold_s is not None:
            message["hold_s"] = self.hold_s
        return message


class Breaker:
    """The state of one instance's, model's or zone's breaker.

    Args:
        scope: What it guards.
        name: The instance id, model name or zone.
        open_s: Seconds open before half-open.
        trial_requests: Trials in flight at once when half-open.
        close_after: Consecutive trial passes that close it.
    """

    __slots__ = ("close_after", "name", "open_s", "passes", "reason", "scope", "since", "state", "trial_requests",
                 "trials_out")

    def __init__(self, scope: Scope, name: str, *, open_s: float, trial_requests: int, close_after: int) -> None:
        self.scope, self.name = scope, name
        self.open_s, self.trial_requests, self.close_after = open_s, trial_requests, close_after
        self.state = BreakerState.CLOSED
        self.since = 0.0
        self.reason = ""
        self.trials_out = 0
        self.passes = 0

    def blocks(self) -> bool:
        """True while no request may go through it (open, or half-open with every trial slot taken)."""
        state = self.state
        return state is BreakerState.OPEN or (state is BreakerState.HALF_OPEN
                                              and self.trials_out >= self.trial_requests)

    def move(self, to: BreakerState, reason: str, now: float, *, remote: bool = False) -> Transition | None:
        """Go to ``to`` (None when already there); resets the trial counters."""
        if to is self.state:
            return None
        t = Transition(self.scope, self.name, self.state, to, reason, now, remote)
        self.state, self.since, self.reason = to, now, reason
        self.trials_out = self.passes = 0
        return t

    def due(self, now: float) -> Transition | None:
        """Open for ``open_s`` already: go half-open."""
        if self.state is BreakerState.OPEN and now - self.since >= self.open_s:
            return self.move(BreakerState.HALF_OPEN, f"open {self.open_s:g} s: trying {self.trial_requests} "
                                                     f"request(s) at a time", now)
        return None

    def take_trial(self) -> bool:
        """Half-open: take a trial slot if one is free (closed: always True, open: False)."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN or self.trials_out >= self.trial_requests:
            return False
        self.trials_out += 1
        return True

    def trial_done(self, passed: bool, now: float, why: str) -> Transition | None:
        """A trial ended: count a pass (closing after ``close_after``), or reopen on a failure."""
        if self.state is not BreakerState.HALF_OPEN:
            return None
        self.trials_out = max(0, self.trials_out - 1)
        if not passed:
            return self.move(BreakerState.OPEN, f"half-open trial failed: {why}", now)
        self.passes += 1
        if self.passes >= self.close_after:
            return self.move(BreakerState.CLOSED, f"{self.passes} consecutive trial passes", now)
        return None

    def view(self, now: float) -> dict[str, Any]:
        """The ``GET /v1/router/state`` row."""
        return {"scope": self.scope, "name": self.name, "state": self.state.label, "since_s": round(now - self.since, 3)
                if self.state is not BreakerState.CLOSED or self.reason else None, "reason": self.reason or None,
                "trials_in_flight": self.trials_out, "passes": self.passes}
