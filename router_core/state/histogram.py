"""Percentiles of Prometheus histograms over the interval between two scrapes.

Engine histograms are cumulative since start; what routing needs is the recent distribution, so
the quantile is taken over the bucket deltas, interpolating linearly inside a bucket the way
PromQL's ``histogram_quantile`` does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["Buckets", "delta_quantile"]

Buckets = tuple[tuple[float, float], ...]  # ((upper bound "le", cumulative count), ...) sorted by le


def delta_quantile(previous: Buckets | None, current: Buckets, q: float) -> float | None:
    """Return the ``q`` quantile (in the histogram's unit) of the observations between two scrapes.

    Returns None when nothing was observed in between, or when the two scrapes do not share bucket
    bounds, or when the counter went backwards (the engine restarted: the current totals then are
    the delta).
    """
    if previous is not None and [le for le, _ in previous] != [le for le, _ in current]:
        previous = None
    deltas: Sequence[tuple[float, float]] = current
    if previous is not None:
        diff = tuple((le, c - p) for (le, c), (_, p) in zip(current, previous, strict=True))
        if all(d >= 0 for _, d in diff):
            deltas = diff
    total = deltas[-1][1] if deltas else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le, count in deltas:
        if count >= rank:
            if math.isinf(le):
                return lower_le  # the quantile lies in the +Inf bucket: report its lower bound
            if count == lower_count:
                return le
            return lower_le + (le - lower_le) * (rank - lower_count) / (count - lower_count)
        lower_le, lower_count = le, count
    return lower_le
