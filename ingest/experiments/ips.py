"""Off-policy estimates from logged traffic: what would a candidate policy's mean cost or misroute rate be?

Each logged request carries the probability the live picker gave the instance it served
(``DecisionTrace.selection_probability``). A candidate policy's choices come from replaying the same
requests under it (``app`` wires replay; ``ingest`` never imports ``router_core``): for each request
the probability the candidate gives the *logged* choice (1.0 or 0.0 for a deterministic candidate:
"does it pick the same instance?"). The self-normalised inverse-propensity estimate is

    w_i = target_i / logged_i,        V = Σ w_i r_i / Σ w_i

with the delta-method (sandwich) variance ``Σ w_i² (r_i - V)² / (Σ w_i)²`` for its interval. It is
unbiased only where the live picker could have made the candidate's choice (logged_i > 0 wherever
target_i > 0): requests the candidate routes to an instance the live policy never samples carry no
information, so ``matched`` and the Kish ``effective_n`` say how much the estimate rests on.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from ingest.experiments.stats import z_for
from schemas.experiments import IpsEstimate

__all__ = ["MIN_MATCHED", "ips_estimate", "ips_report"]

MIN_MATCHED = 30
"""Fewest requests with a non-zero weight before an estimate is given."""


def ips_estimate(
    logged_prob: npt.ArrayLike,
    target_prob: npt.ArrayLike,
    reward: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
    min_matched: int = MIN_MATCHED,
    unlogged: int = 0,
) -> IpsEstimate:
    """Return the self-normalised IPS estimate of the candidate's mean ``reward``, with its interval.

    Args:
        logged_prob: Per request, the live picker's probability of the served instance; requests
            where it is missing (NaN) or not positive are left out.
        target_prob: Per request, the candidate policy's probability of that same instance; a
            boolean "the candidate picks the same instance" works as 1.0/0.0.
        reward: Per request, the observed value (cost, or 1.0/0.0 for a misroute); NaN leaves the
            request out (a misroute rate counts only requests with feedback).
        confidence: Of the interval.
        bounds: Clip the interval to this range (``(0, 1)`` for a rate).
        min_matched: Fewest requests with a non-zero weight before a value is given.
        unlogged: Requests left out before the arrays because they carry no logged probability
            (counted with the NaN ones in the note that says why there is no estimate).
    """
    logged = np.asarray(logged_prob, dtype=np.float64)
    target = np.asarray(target_prob, dtype=np.float64)
    r = np.asarray(reward, dtype=np.float64)
    if not (logged.shape == target.shape == r.shape):
        raise ValueError(f"shapes differ: {logged.shape}, {target.shape}, {r.shape}")
    if np.any((target < 0) | (target > 1)) or np.any(logged > 1):
        raise ValueError("probabilities must lie in [0, 1]")
    has_prob = np.isfinite(logged) & (logged > 0)
    without = unlogged + int((~has_prob).sum())
    keep = has_prob & np.isfinite(target) & np.isfinite(r)
    logged, target, r = logged[keep], target[keep], r[keep]
    n = int(keep.sum())
    logged_mean = float(r.mean()) if n else None
    w = target / logged if n else np.zeros(0)
    matched = int((w > 0).sum())
    sw = float(w.sum())
    if matched < min_matched or sw <= 0:
        return IpsEstimate(value=None, ci=None, n=n, matched=matched, effective_n=0.0 if sw <= 0 else
                           sw * sw / float((w * w).sum()), logged_mean=logged_mean,
                           note=_why_none(matched, min_matched, without, bool(has_prob.any())))
    value = float((w * r).sum() / sw)
    se = math.sqrt(float((w * w * (r - value) ** 2).sum())) / sw
    half = z_for(confidence) * se
    lo, hi = value - half, value + half
    if bounds is not None:
        lo, hi = max(bounds[0], lo), min(bounds[1], hi)
    return IpsEstimate(value=value, ci=(lo, hi), n=n, matched=matched, effective_n=sw * sw / float((w * w).sum()),
                       logged_mean=logged_mean)


def _why_none(matched: int, min_matched: int, without: int, any_logged: bool) -> str:
    """Why no estimate: no request carries a selection probability, or too few match the candidate."""
    if without and not any_logged:
        return (f"the traces carry no selection probability: none of the {without:,} requests has one "
                "(written before RouteLens recorded it, or served by a retry)")
    note = f"not enough data: {matched} logged requests match the candidate (need {min_matched})"
    return f"{note}; {without:,} more carry no selection probability" if without else note


def ips_report(
    logged_prob: npt.ArrayLike,
    target_prob: npt.ArrayLike,
    cost: npt.ArrayLike,
    misroute: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    unlogged: int = 0,
) -> dict[str, IpsEstimate]:
    """Return the candidate's ``cost_per_request`` and ``misroute_rate`` estimates (``CompareReport.ips``).

    ``misroute`` is 1.0 (feedback said wrong), 0.0 (said right) or NaN (no feedback) per request;
    ``cost`` is NaN where none was recorded. The caller (``app``, which replays the requests under
    the candidate) passes one value per logged request, in the same order for every argument, and
    counts the requests without a logged probability it left out in ``unlogged``.
    """
    return {
        "cost_per_request": ips_estimate(logged_prob, target_prob, cost, confidence=confidence, unlogged=unlogged),
        "misroute_rate": ips_estimate(logged_prob, target_prob, misroute, confidence=confidence, bounds=(0.0, 1.0),
                                      unlogged=unlogged),
    }
