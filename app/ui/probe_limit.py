"""A probe kind's bound from the running configuration, and how a probe's value reads against it.

- ``semantic``: the answer's cosine similarity must reach its reference's own threshold (the
  references file ``probes.semantic.references`` names, else the packaged one), else
  ``probes.semantic.threshold``; below it the probe ``failed`` (red).
- ``latency``: the window p95 must stay within ``baseline × (1 ± probes.latency.tolerance)``, the
  baseline the result carries (the prober learned it); out of the band it is ``degraded`` (amber).
- ``syntax``: the answer must be valid (value 1); an invalid one ``failed``.

A result without a value (its request failed: the reason says why; the latency baseline still
learning) cannot be judged by a bound: the prober's verdict stands. So does a latency verdict that
the p95 does not show (a creeping trend, an off-baseline p50): a p95 inside the band does not clear it.
Pure apart from reading the references file (the prober's loader, cached by its mtime).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from app.units import DASH, Unit, fmt, fmt_apart, over_limit
from probes.references import DEFAULT_REFERENCES, load_references
from schemas.config.probes import ProbeSettings
from schemas.errors import ConfigError

__all__ = ["VERDICT_RANK", "ProbeLimit", "build_probe_limit", "over_limit_apart", "reference_thresholds"]

VERDICT_RANK = {"ok": 0, "degraded": 1, "failed": 2}


def over_limit_apart(value: float | None, limit: float | None, unit: Unit) -> str:
    """``value / limit`` (:func:`app.units.over_limit`), never two different numbers alike.

    A value just past its bound must not read as the bound itself: ``91.9 ms / 92.0 ms``, ``85.1% / 85.0%``,
    not ``92 ms / 92 ms`` under a verdict that says it broke it (:func:`app.units.fmt_apart`).
    """
    if limit is None or unit in ("requests", "cost"):
        return over_limit(value, limit, unit)
    shown, bound = fmt_apart(value, limit, unit)
    return f"{shown} / {bound}"


@dataclass(frozen=True)
class ProbeLimit:
    """Where one probe's value must lie (``low`` ≤ value ≤ ``high``), what it is past that, who set it."""

    kind: str
    low: float | None
    high: float | None
    unit: Unit
    breach: str  # the verdict past the bound: failed (semantic, syntax) or degraded (latency)
    source: str
    decisive: bool  # a value inside the bound is ok whatever was recorded (False: latency, see the module)

    def is_broken(self, value: float | None) -> bool:
        """True when ``value`` lies outside the bound (None or NaN: unknown, not broken)."""
        if value is None or math.isnan(value):
            return False
        return (self.low is not None and value < self.low) or (self.high is not None and value > self.high)

    def verdict(self, value: float | None, recorded: str) -> str:
        """The verdict ``value`` earns against this bound; ``recorded`` (the prober's) where the bound cannot say."""
        if value is None or math.isnan(value) or (self.low is None and self.high is None):
            return recorded
        if self.is_broken(value):
            return max(self.breach, recorded, key=lambda v: VERDICT_RANK.get(v, 0))
        return "ok" if self.decisive else recorded

    def text(self, value: float | None) -> str:
        """``value / limit`` with the unit: ``0.310 / 0.650``, ``1,275 ms / 640–960 ms``, ``valid``."""
        if self.kind == "syntax":
            return DASH if value is None or math.isnan(value) else "valid" if value >= 1 else "invalid"
        if self.low is not None and self.high is not None:
            low, high = fmt(self.low, self.unit), fmt(self.high, self.unit)
            shown = fmt(value, self.unit)
            if value is not None and not math.isnan(value):  # the nearer edge read apart from the value
                if abs(value - self.low) <= abs(value - self.high):
                    shown, low = fmt_apart(value, self.low, self.unit)
                else:
                    shown, high = fmt_apart(value, self.high, self.unit)
            return f"{shown} / {low.removesuffix(' ms')}–{high}"
        return over_limit_apart(value, self.low if self.low is not None else self.high, self.unit)


def build_probe_limit(kind: str, settings: ProbeSettings, thresholds: dict[str, float], *,
                      baseline: float | None = None, reference: str | None = None) -> ProbeLimit | None:
    """The bound of a ``kind`` probe under ``settings`` (None for a kind it does not know).

    Args:
        kind: ``semantic``, ``latency`` or ``syntax``.
        settings: The running configuration's ``probes:``.
        thresholds: Reference id -> its own threshold (:func:`reference_thresholds`).
        baseline: Latency: the learned baseline p95 (ms) the result carries; None while learning.
        reference: Semantic: the reference the result scored lowest against.
    """
    if kind == "semantic":
        own = thresholds.get(reference) if reference else None
        source = f"reference {reference}'s own threshold" if own is not None else "probes.semantic.threshold"
        return ProbeLimit(kind, settings.semantic.threshold if own is None else own, None, "score", "failed",
                          source, True)
    if kind == "latency":
        tol = settings.latency.tolerance
        if baseline is None or math.isnan(baseline):
            return ProbeLimit(kind, None, None, "ms", "degraded", "probes.latency: baseline still learning", False)
        return ProbeLimit(kind, baseline * (1 - tol), baseline * (1 + tol), "ms", "degraded",
                          f"probes.latency.tolerance ±{tol:.0%} of baseline {fmt(baseline, 'ms')}", False)
    if kind == "syntax":
        return ProbeLimit(kind, 1.0, None, "n", "failed", "probes.syntax: a valid answer", True)
    return None


def reference_thresholds(path: str | None) -> dict[str, float]:
    """Reference id -> its own threshold, from the references file at ``path`` (None: the packaged one).

    Read with the prober's own loader (:func:`probes.references.load_references`), cached by the
    file's mtime; a file it refuses gives none, so every reference is judged by
    ``probes.semantic.threshold``.
    """
    file = Path(path) if path else DEFAULT_REFERENCES
    try:
        return dict(_read(str(file), file.stat().st_mtime_ns))
    except (OSError, ConfigError):
        return {}


@lru_cache(maxsize=4)
def _read(path: str, mtime_ns: int) -> tuple[tuple[str, float], ...]:
    return tuple((r.id, r.threshold) for r in load_references(path) if r.threshold is not None)
