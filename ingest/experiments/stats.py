"""Pure statistics for comparing two experiment arms: intervals, the split check, corrections.

Nothing here touches storage: the backends aggregate (counts, sums, a binned latency histogram) and
hand plain numbers here. Every function is deterministic given its ``seed``.

Choices, and what they cost:

- **Rates** (error, fallback, misroute): the Wilson score interval per arm, Newcombe's hybrid
  (method 10, built on two Wilson intervals) for the difference ``b - a``, and a pooled two-proportion
  z-test for the p-value. Both intervals keep their coverage near 95% for small counts and rates
  near 0 or 1, where the Wald interval does not.
- **Means** (cost per request, quality score): the Welch interval ``delta ± z·sqrt(va/na + vb/nb)``
  from each arm's count, mean and sample variance. With the minimum-sample guard in force, this is
  the large-sample limit of the bootstrap of the mean and costs nothing on 1M rows per arm.
- **Quantiles** (latency p50/p95): the point values are the store's own quantiles of the rows
  (DuckDB's ``quantile_cont``, which the Overview shows; Elasticsearch's ``percentiles``); the
  interval is a bootstrap on a binned representation (:class:`LogBins`, ~0.52% wide), moved onto
  them: :mod:`ingest.experiments.quantiles` (its names are handed on here), which says how and why.
- **Split check** (sample-ratio mismatch): Pearson's chi-square of the observed arm counts against
  the designed shares. With two arms it has one degree of freedom, whose survival function is
  closed-form: ``P(X > x) = erfc(sqrt(x / 2))``; no scipy.
- **Many metrics at once**: Holm's step-down correction (controls the family-wise error, uniformly
  more powerful than Bonferroni); Benjamini-Hochberg is offered for false-discovery control.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from statistics import NormalDist

from ingest.experiments.quantiles import LogBins, bootstrap_quantile_diff, quantile_from_counts

__all__ = [
    "DEFAULT_MIN_SAMPLES",
    "SRM_ALPHA",
    "LogBins",
    "benjamini_hochberg",
    "bootstrap_quantile_diff",
    "chi2_sf_1dof",
    "has_enough_data",
    "holm",
    "mean_diff_interval",
    "newcombe_interval",
    "quantile_from_counts",
    "srm_test",
    "two_proportion_p",
    "wilson_interval",
    "z_for",
]

SRM_ALPHA = 0.001
"""Below this p-value the split is flagged as a sample-ratio mismatch (GrowthBook, Eppo, Statsig)."""

DEFAULT_MIN_SAMPLES = 100
"""Fewest requests per arm before a comparison gives a verdict instead of "not enough data"."""

_NORMAL = NormalDist()


def z_for(confidence: float = 0.95) -> float:
    """Return the two-sided standard normal quantile for ``confidence`` (1.959964 for 0.95)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return _NORMAL.inv_cdf(0.5 + confidence / 2.0)


def _normal_two_sided_p(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2.0))


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Return the Wilson score interval of the rate ``successes / n``.

    Args:
        successes: How many of the ``n`` trials succeeded (0 ≤ successes ≤ n).
        n: Trials; 0 gives the uninformative interval ``(0.0, 1.0)``.
        z: The normal quantile (1.96 for 95%).

    Returns:
        ``(lo, hi)``, both within [0, 1].
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # The exact endpoints at 0 and n are 0 and 1; rounding can leave 1e-17 outside them.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def newcombe_interval(s_a: int, n_a: int, s_b: int, n_b: int, z: float = 1.96) -> tuple[float, float]:
    """Return Newcombe's hybrid score interval (method 10) for the difference of rates ``b - a``."""
    p_a = s_a / n_a if n_a else 0.0
    p_b = s_b / n_b if n_b else 0.0
    lo_a, hi_a = wilson_interval(s_a, n_a, z)
    lo_b, hi_b = wilson_interval(s_b, n_b, z)
    delta = p_b - p_a
    lo = delta - math.sqrt((p_b - lo_b) ** 2 + (hi_a - p_a) ** 2)
    hi = delta + math.sqrt((hi_b - p_b) ** 2 + (p_a - lo_a) ** 2)
    return (max(-1.0, lo), min(1.0, hi))


def two_proportion_p(s_a: int, n_a: int, s_b: int, n_b: int) -> float:
    """Return the two-sided p-value of the pooled two-proportion z-test (1.0 when undefined)."""
    if n_a == 0 or n_b == 0:
        return 1.0
    pooled = (s_a + s_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / n_a + 1.0 / n_b))
    if se == 0.0:
        return 1.0
    return _normal_two_sided_p((s_b / n_b - s_a / n_a) / se)


def mean_diff_interval(
    mean_a: float, var_a: float, n_a: int, mean_b: float, var_b: float, n_b: int, z: float = 1.96
) -> tuple[float, float, float]:
    """Return the Welch interval and p-value for the difference of means ``b - a``.

    ``var_*`` are sample variances (``n - 1`` denominator). Returns ``(lo, hi, p)``; with no spread
    at all the interval collapses on the delta and ``p`` is 1.0 when the delta is 0, else 0.0.
    """
    if n_a == 0 or n_b == 0:
        return (-math.inf, math.inf, 1.0)
    delta = mean_b - mean_a
    se = math.sqrt(max(var_a, 0.0) / n_a + max(var_b, 0.0) / n_b)
    if se == 0.0:
        return (delta, delta, 1.0 if delta == 0.0 else 0.0)
    return (delta - z * se, delta + z * se, _normal_two_sided_p(delta / se))


def chi2_sf_1dof(x: float) -> float:
    """Return ``P(X > x)`` for a chi-square variable with one degree of freedom."""
    if x <= 0.0:
        return 1.0
    return math.erfc(math.sqrt(x / 2.0))


def srm_test(n_a: int, n_b: int, share_a: float = 0.5, share_b: float = 0.5) -> float:
    """Return the chi-square p-value of the observed split ``(n_a, n_b)`` against the designed shares.

    The shares need not sum to 1 (they are normalised), so arms of a three-way design can be
    compared two at a time. A p-value below :data:`SRM_ALPHA` is a sample-ratio mismatch.
    """
    if share_a <= 0.0 or share_b <= 0.0:
        raise ValueError(f"designed shares must be positive, got {share_a}, {share_b}")
    total = n_a + n_b
    if total == 0:
        return 1.0
    w_a = share_a / (share_a + share_b)
    e_a, e_b = total * w_a, total * (1.0 - w_a)
    stat = (n_a - e_a) ** 2 / e_a + (n_b - e_b) ** 2 / e_b
    return chi2_sf_1dof(stat)


def holm(pvalues: Mapping[str, float], alpha: float = 0.05) -> dict[str, tuple[float, bool]]:
    """Apply Holm's step-down correction; return ``{name: (adjusted_p, significant)}``.

    Adjusted p-values are monotone in the raw ones: ``p_(i)^adj = max_{j<=i} min(1, (m-j+1)·p_(j))``.
    """
    m = len(pvalues)
    ordered = sorted(pvalues.items(), key=lambda kv: (kv[1], kv[0]))
    out: dict[str, tuple[float, bool]] = {}
    running = 0.0
    for i, (name, p) in enumerate(ordered):
        running = max(running, min(1.0, (m - i) * p))
        out[name] = (running, running <= alpha)
    return out


def benjamini_hochberg(pvalues: Mapping[str, float], alpha: float = 0.05) -> dict[str, tuple[float, bool]]:
    """Apply the Benjamini-Hochberg step-up correction; return ``{name: (adjusted_q, significant)}``."""
    m = len(pvalues)
    ordered = sorted(pvalues.items(), key=lambda kv: (kv[1], kv[0]))
    out: dict[str, tuple[float, bool]] = {}
    running = 1.0
    for rank in range(m, 0, -1):
        name, p = ordered[rank - 1]
        running = min(running, p * m / rank)
        out[name] = (running, running <= alpha)
    return out


def has_enough_data(n_a: int, n_b: int, minimum: int = DEFAULT_MIN_SAMPLES) -> bool:
    """Return True when both arms have at least ``minimum`` observations."""
    return n_a >= minimum and n_b >= minimum
