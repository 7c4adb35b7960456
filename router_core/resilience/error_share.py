"""An error share over a sliding window of seconds, and since when it is too high (model and zone breakers)."""

from __future__ import annotations

from collections import deque

from schemas.config.resilience import RateBreakerSettings

__all__ = ["ErrorShare"]


class ErrorShare:
    """Attempts and errors per second over a sliding window, and since when the share is too high.

    The window's sums are kept as buckets come and go (each attempt's check is constant time, not one
    pass over the window's seconds).
    """

    __slots__ = ("above_since", "buckets", "errors", "settings", "total")

    def __init__(self, settings: RateBreakerSettings) -> None:
        self.settings = settings
        self.buckets: deque[list[int]] = deque()  # [second, attempts, errors]
        self.total = self.errors = 0  # over the buckets
        self.above_since: float | None = None

    def add(self, now: float, error: bool) -> None:
        """Count one attempt at ``now`` (an error or not)."""
        sec = int(now)
        if not self.buckets or self.buckets[-1][0] != sec:
            self.buckets.append([sec, 0, 0])
        last = self.buckets[-1]
        last[1] += 1
        last[2] += error
        self.total += 1
        self.errors += error

    def reset(self) -> None:
        """Forget the window (its breaker closed: it starts counting again)."""
        self.buckets.clear()
        self.total = self.errors = 0
        self.above_since = None

    def tripped(self, now: float) -> str | None:
        """The reason to open, once the share has stayed above the threshold ``for_s``."""
        s = self.settings
        buckets = self.buckets
        while buckets and buckets[0][0] <= now - s.window_s:
            _, attempts, errors = buckets.popleft()
            self.total -= attempts
            self.errors -= errors
        total, errors = self.total, self.errors
        if total < s.min_requests or errors / total <= s.threshold:
            self.above_since = None
            return None
        if self.above_since is None:
            self.above_since = now
        if now - self.above_since < s.for_s:
            return None
        return (f"error share {errors / total:.0%} of {int(total)} attempts over {s.window_s:g} s above "
                f"{s.threshold:.0%} for {now - self.above_since:.0f} s")
