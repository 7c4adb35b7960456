"""Rate curves for open-loop traffic: steady, diurnal, and a surge window (the seed's ×10 inspection).

Arrival times are drawn once, up front, from a seeded generator (a Poisson process thinned to the
curve), so the same curve and seed always give the same schedule, whatever the answers' speed.
"""

from __future__ import annotations

import math
import random
from typing import Literal

from pydantic import Field, model_validator

from schemas.common import ContractModel

__all__ = ["RateCurve"]


class RateCurve(ContractModel):
    """Requests per second over time.

    ``steady``: ``rps``. ``diurnal``: ``rps * (1 + amplitude * sin(2πt / period_s))``, a day
    compressed into ``period_s``. A surge window (``surge_start_s`` set; required for ``surge``)
    multiplies the rate by ``surge_multiplier`` for ``surge_duration_s``.
    """

    kind: Literal["steady", "diurnal", "surge"] = "steady"
    rps: float = Field(10.0, gt=0, le=5000)
    period_s: float = Field(60.0, gt=0)
    amplitude: float = Field(0.5, ge=0, le=1)
    surge_start_s: float | None = Field(None, ge=0)
    surge_duration_s: float = Field(10.0, gt=0)
    surge_multiplier: float = Field(10.0, ge=1)
    poisson: bool = Field(True, description="Exponential gaps; false sends at exact intervals.")

    @model_validator(mode="after")
    def _surge_needs_a_window(self) -> RateCurve:
        if self.kind == "surge" and self.surge_start_s is None:
            raise ValueError("a surge curve needs surge_start_s")
        return self

    def in_surge(self, t: float) -> bool:
        """True when ``t`` seconds from the start fall in the surge window."""
        start = self.surge_start_s
        return start is not None and start <= t < start + self.surge_duration_s

    def rate(self, t: float) -> float:
        """Requests per second at ``t`` seconds from the start."""
        base = self.rps
        if self.kind == "diurnal":
            base *= 1.0 + self.amplitude * math.sin(2 * math.pi * t / self.period_s)
        return base * (self.surge_multiplier if self.in_surge(t) else 1.0)

    def peak(self) -> float:
        """An upper bound of :meth:`rate`."""
        amp = self.amplitude if self.kind == "diurnal" else 0.0
        surge = self.surge_multiplier if self.surge_start_s is not None else 1.0
        return self.rps * (1.0 + amp) * surge

    def arrivals(self, duration_s: float, rng: random.Random, limit: int = 1_000_000) -> list[float]:
        """Arrival offsets in ``[0, duration_s)``, at most ``limit`` of them.

        Args:
            duration_s: Length of the schedule.
            rng: Seeded source (Poisson gaps and thinning).
            limit: Cap on the number of arrivals.

        Returns:
            Sorted offsets in seconds.
        """
        out: list[float] = []
        if not self.poisson:
            t = 0.0
            while t < duration_s and len(out) < limit:
                out.append(t)
                t += 1.0 / self.rate(t)
            return out
        peak = self.peak()
        t = rng.expovariate(peak)
        while t < duration_s and len(out) < limit:
            if rng.random() * peak < self.rate(t):
                out.append(t)
            t += rng.expovariate(peak)
        return out
