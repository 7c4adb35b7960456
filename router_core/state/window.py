"""The router's own observations of an instance over a sliding time window."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["ObservationWindow", "WindowStats"]


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Summary of the window: request count, error share, latency median and p95.

    The error share is over every request; the latencies over those answered (``ok``) only: an
    instance refusing fast (a 429, a 503, a connection refused) is not a fast instance. None: no
    request (the share), no answered one (the latencies).
    """

    requests: int
    error_rate: float | None
    p50_ms: float | None
    p95_ms: float | None


class ObservationWindow:
    """Keeps ``(t, latency_ms, ok)`` of the last ``span_s`` seconds.

    ``ok``: answered (a success, or a 4xx that is the client's fault); a failure (timeout,
    connection error, 429, 5xx) counts in the error share and not in the latencies.

    Args:
        span_s: Window length (the seeds use 10 s).
        max_items: Bound on memory under very high rates (the oldest go first).
    """

    def __init__(self, span_s: float = 10.0, max_items: int = 10_000) -> None:
        self.span_s = span_s
        self._items: deque[tuple[float, float, bool]] = deque(maxlen=max_items)

    def add(self, t: float, latency_ms: float, ok: bool) -> None:
        """Record one request's result at monotonic time ``t``."""
        self._items.append((t, latency_ms, ok))

    def stats(self, now: float) -> WindowStats:
        """Drop what fell out of the window and summarise the rest."""
        items = self._items
        while items and items[0][0] < now - self.span_s:
            items.popleft()
        n = len(items)
        if n == 0:
            return WindowStats(0, None, None, None)
        latencies = sorted(x[1] for x in items if x[2])
        errors = n - len(latencies)
        k = len(latencies)
        if k == 0:
            return WindowStats(n, errors / n, None, None)
        return WindowStats(n, errors / n, latencies[(k - 1) // 2], latencies[min(k - 1, int(0.95 * k))])
