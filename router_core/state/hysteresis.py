"""A two-threshold, two-dwell latch: the thing that keeps instances from flapping in and out.

An instance leaves when its constraint has been broken continuously for ``exit_for`` seconds and
comes back only after it has been continuously on the good side of the (lower) re-entry bound for
``enter_for`` seconds. Time is passed in, so the latch is deterministic and testable.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HysteresisLatch"]


@dataclass(slots=True)
class HysteresisLatch:
    """Latch state for one (instance, constraint).

    Attributes:
        exit_for: Seconds a breach must last before the instance is held out.
        enter_for: Seconds of good values before it is let back in.
        out: True while held out of the feasible set.
        changed_at: Time of the last change of ``out`` (None: never changed).
    """

    exit_for: float
    enter_for: float
    out: bool = False
    changed_at: float | None = None
    _streak_since: float | None = None  # since when the condition for flipping has held

    def update(self, now: float, *, broken: bool, recovered: bool) -> bool:
        """Feed one evaluation; return True when ``out`` changed.

        Args:
            now: Monotonic seconds.
            broken: The value breaks the exit threshold (no data counts as broken).
            recovered: The value satisfies the re-entry bound.
        """
        flipping = recovered if self.out else broken
        if not flipping:
            self._streak_since = None
            return False
        if self._streak_since is None:
            self._streak_since = now
        if now - self._streak_since < (self.enter_for if self.out else self.exit_for):
            return False
        self.out = not self.out
        self.changed_at = now
        self._streak_since = None
        return True
