"""Clocks for the simulator: real time, a manual virtual clock for tests, and scaled model time.

Two times matter. *Wall* time (monotonic seconds, plus the epoch for records other processes
read) drives faults, traffic and the router. *Model* time is wall time multiplied by
``time_scale``: warm-up and service times live in it, so a 90 s warm-up at ``time_scale: 90``
takes one real second.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    """Monotonic seconds and the matching Unix epoch seconds."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def epoch(self) -> float:
        """Unix time of ``now()`` (for records read by other processes)."""
        ...


class RealClock:
    """The machine's clocks."""

    def now(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def epoch(self) -> float:
        """``time.time()``."""
        return time.time()


class VirtualClock:
    """A clock that moves only when told to, for tests.

    Args:
        start: Initial monotonic reading.
        epoch0: Unix time at ``start``.
    """

    def __init__(self, start: float = 1000.0, epoch0: float = 1_700_000_000.0) -> None:
        self._now = start
        self._offset = epoch0 - start

    def now(self) -> float:
        """The current virtual reading."""
        return self._now

    def epoch(self) -> float:
        """Unix time of the current reading."""
        return self._now + self._offset

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds`` (never backward)."""
        if seconds < 0:
            raise ValueError("a clock does not go backward")
        self._now += seconds
