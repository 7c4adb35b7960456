"""The reference quantile the store tests compare against."""

from __future__ import annotations

import math


def quantile(values: list[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (Elasticsearch's exact percentiles on few values;
    DuckDB's ``quantile_cont``); None for no values."""
    if not values:
        return None
    values = sorted(values)
    pos = (len(values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return values[lo] + (values[hi] - values[lo]) * (pos - lo)
