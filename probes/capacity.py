"""Whether the prober keeps up: the probes a period needs in flight, against ``probes.max_concurrent``.

A period holds one probe per (instance, kind); each probe takes its time (a syntax probe a few
hundred ms, a semantic round of six answers one to three seconds). Spread over ``interval_s``,
they need on average ``sum(time of each probe) / interval_s`` of them in flight. Past
``max_concurrent`` the slots wait for a free place, start later and later and end up skipped:
at 200 instances a period needs about 20 in flight (2.8 s of probes per instance a period on the
audit's simulated fleet), and the former fixed default of 16 left three quarters of the probes
more than 10 s late and over a thousand slots skipped within minutes.

:class:`Capacity` keeps a moving mean of each kind's probe time and, at each period's start,
works out what that period needs. With a ceiling (``probes.max_concurrent: auto``) it raises the
limit to 1.5 times the need, up to the ceiling; with a set number it only says so. Either way the
shortfall is logged once per change (``probes cannot keep up``) and published
(``routelens_probe_concurrency_needed``, ``routelens_probe_concurrency_limit``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable

from schemas.common import ProbeKind

__all__ = ["AUTO_CEILING", "AUTO_START", "HEADROOM", "Capacity"]

log = logging.getLogger("probes.scheduler")

AUTO_START = 16  # probes in flight at first under ``max_concurrent: auto`` (the former fixed default)
AUTO_CEILING = 256  # and at most: 10 s probes of 768 instances every 30 s
HEADROOM = 1.5  # limit over need: probe times vary, and the slots' jitter bunches them
_ALPHA = 0.2  # weight of each new probe time in its kind's moving mean


class Capacity:
    """Probe times per kind, and the limit a period's probes need.

    Args:
        limit: Probes in flight allowed now.
        interval_s: The period.
        ceiling: Grow the limit up to this when a period needs more (None: never grow).
        on_change: Called with ``(needed, limit)`` after each period's check (the metrics).
    """

    def __init__(self, limit: int, interval_s: float, ceiling: int | None = None,
                 on_change: Callable[[float, int], None] | None = None) -> None:
        self.limit = limit
        self.needed = 0.0
        self._interval = interval_s
        self._ceiling = ceiling
        self._on_change = on_change
        self._took: dict[ProbeKind, float] = {}
        self._short = False

    def took(self, kind: ProbeKind, seconds: float) -> None:
        """Record one probe's own time (from its start, not from its slot)."""
        prev = self._took.get(kind)
        self._took[kind] = seconds if prev is None else prev + _ALPHA * (seconds - prev)

    def mean_s(self) -> dict[ProbeKind, float]:
        """The moving mean of each kind's probe time, in seconds."""
        return dict(self._took)

    def check(self, kinds: Iterable[ProbeKind]) -> int:
        """Work out what a period of probes of ``kinds`` (one per slot) needs; return the limit to hold.

        Grows the limit when a ceiling allows it; logs a shortfall once per change.
        """
        planned = list(kinds)
        self.needed = sum(self._took.get(k, 0.0) for k in planned) / self._interval
        wanted = math.ceil(self.needed * HEADROOM)
        if self._ceiling is not None and self.limit < min(wanted, self._ceiling):
            grown = min(self._ceiling, wanted)
            log.info("probes in flight raised from %d to %d: a period of %d probes needs about %.1f",
                     self.limit, grown, len(planned), self.needed)
            self.limit = grown
        short = self.needed > self.limit
        if short and not self._short:
            times = ", ".join(f"{k.value} {s:.2f} s" for k, s in sorted(self._took.items()))
            advice = (f"it is at its ceiling {self._ceiling}" if self._ceiling is not None else
                      f"raise probes.max_concurrent to {wanted} or set it to auto")
            log.warning("probes cannot keep up: a period of %d probes needs about %.1f in flight (mean probe "
                        "time %s; probes.interval_s %g s) and at most %d run at once: probes start late and "
                        "slots are skipped; %s", len(planned), self.needed, times, self._interval, self.limit,
                        advice)
        elif self._short and not short:
            log.warning("probes keep up again: a period needs about %.1f in flight, %d allowed",
                        self.needed, self.limit)
        self._short = short
        if self._on_change is not None:
            self._on_change(self.needed, self.limit)
        return self.limit
