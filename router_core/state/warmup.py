"""An instance's warm-up progress, 0-1, and where it came from (the seed: ~90 s cold after a start).

Only the simulator exports a warm-up gauge. A real engine does not, but every prometheus_client
process exports ``process_start_time_seconds`` (vLLM's ``/metrics`` has it), so its warm-up is
its uptime over ``scrape.warmup_s``, capped at 1. An engine with neither (TGI, SGLang) is assumed
warm, as before, and says so: ``warmup_source="assumed"`` rides in every snapshot and trace.

Pure: the caller passes the scrape time from its injected clock. A restart shows as a newer start
time, so the ramp starts again by itself; a restart of the gateway changes nothing (the uptime
is the instance's own).
"""

from __future__ import annotations

import math
from typing import Literal

__all__ = ["WarmupSource", "warmup_progress"]

WarmupSource = Literal["gauge", "uptime", "assumed"]


def warmup_progress(
    gauge: float | None, started_s: float | None, at_s: float, warmup_s: float,
) -> tuple[float, WarmupSource]:
    """Return ``(progress, source)`` for one scrape.

    Args:
        gauge: The engine's own warm-up gauge (it wins wherever it is a number in [0, 1]).
        started_s: The engine process's start, Unix seconds (``process_start_time_seconds``).
        at_s: When the scrape was taken, Unix seconds (the caller's injected clock).
        warmup_s: Seconds from process start to warm; 0 turns the uptime ramp off.
    """
    if gauge is not None and 0.0 <= gauge <= 1.0:  # NaN fails the comparison
        return gauge, "gauge"
    if started_s is None or not math.isfinite(started_s) or warmup_s <= 0:
        return 1.0, "assumed"
    return min(max((at_s - started_s) / warmup_s, 0.0), 1.0), "uptime"
