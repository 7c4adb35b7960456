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
  interval is a bootstrap on a binned representation, moved onto them. Each arm arrives as counts
  over the same log-spaced bins (:class:`LogBins`, ~0.52% wide); each replicate redraws the
  counts from a multinomial with the observed bin shares, and reads the quantile from the redrawn
  cumulative counts (rank ``q·n``), interpolating linearly inside the bin. Only the bins within ±6
  standard errors of the quantile's level are redrawn one by one (the rest are two lumped cells,
  which is the same multinomial), so the cost is ``O(replicates × window)``: a few dozen bins at 1M
  rows, whatever the number of rows. The binned quantile differs from the interpolated one by the
  bin width (0.52%) plus the rank convention (several percent at a few dozen rows, where the
  order statistics are far apart), which is why it gives only the spread: the replicate deltas are
  moved by the difference between the exact delta and the binned one, and the interval is their
  percentile interval.
- **Split check** (sample-ratio mismatch): Pearson's chi-square of the observed arm counts against
  the designed shares. With two arms it has one degree of freedom, whose survival function is
  closed-form: ``P(X > x) = erfc(sqrt(x / 2))``; no scipy.
- **Many metrics at once**: Holm's step-down correction (controls the family-wise error, uniformly
  more powerful than Bonferroni); Benjamini-Hochberg is offered for false-discovery control.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

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


@dataclass(frozen=True)
class LogBins:
    """Log-spaced bins shared by both arms.

    Bin 0 is ``[0, lo)``, bin ``i`` (1..k) is ``[lo·r^(i-1), lo·r^i)`` with ``r = (hi/lo)^(1/k)``,
    and bin ``k+1`` holds everything ``>= hi``.

    The defaults (0.1 ms to ~28 h in 4,000 bins) give a ratio of ~1.0052: a quantile read from the
    bins is within 0.52% of the exact one.
    """

    lo: float = 0.1
    hi: float = 1e8
    k: int = 4000

    @property
    def ratio(self) -> float:
        """The ratio between consecutive bin edges."""
        return float((self.hi / self.lo) ** (1.0 / self.k))

    @property
    def size(self) -> int:
        """The number of bins, underflow and overflow included."""
        return self.k + 2

    def edges(self) -> npt.NDArray[np.float64]:
        """Return the ``size + 1`` bin edges; the overflow bin is closed at ``hi · ratio``."""
        inner = self.lo * self.ratio ** np.arange(self.k + 1, dtype=np.float64)
        return np.concatenate(([0.0], inner, [self.hi * self.ratio]))

    def index(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Return the bin of each value (the same arithmetic the SQL backends use)."""
        v = np.asarray(values, dtype=np.float64)
        safe = np.maximum(v, self.lo)
        idx = np.floor(np.log(safe / self.lo) / math.log(self.ratio)).astype(np.int64) + 1
        idx = np.where(v < self.lo, 0, np.minimum(idx, self.k + 1))
        return idx.astype(np.int64)

    def counts(self, values: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Return per-bin counts of ``values`` (for tests and in-memory stores)."""
        return np.bincount(self.index(values), minlength=self.size).astype(np.int64)

    def from_sparse(self, sparse: Mapping[int, int] | Sequence[tuple[int, int]]) -> npt.NDArray[np.int64]:
        """Return dense counts from ``{bin: count}`` (what a ``GROUP BY bin`` returns)."""
        dense = np.zeros(self.size, dtype=np.int64)
        items = sparse.items() if isinstance(sparse, Mapping) else sparse
        for b, c in items:
            dense[min(max(int(b), 0), self.k + 1)] += int(c)
        return dense


def _quantiles_rows(counts: npt.NDArray[np.int64], edges: npt.NDArray[np.float64], q: float) -> npt.NDArray[np.float64]:
    """Quantile ``q`` of each row of ``counts`` (replicates × bins), NaN for an empty row."""
    rows = np.atleast_2d(counts)
    out = _quantiles_sparse(rows, edges[:-1], edges[1:], q)
    return np.where(rows.sum(axis=1) > 0, out, np.nan)


def quantile_from_counts(counts: npt.ArrayLike, bins: LogBins, q: float) -> float:
    """Return quantile ``q`` (0..1) of the binned values, or NaN for empty counts."""
    arr = np.asarray(counts, dtype=np.int64)
    return float(_quantiles_rows(arr, bins.edges(), q)[0])


def bootstrap_quantile_diff(
    counts_a: npt.ArrayLike,
    counts_b: npt.ArrayLike,
    bins: LogBins,
    q: float,
    *,
    replicates: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    points: tuple[float, float] | None = None,
) -> tuple[float, float, float, float, float]:
    """Bootstrap the difference of quantile ``q`` (b - a) from two binned samples.

    Returns ``(a, b, lo, hi, p)``: the two point quantiles, the percentile interval of the
    replicate deltas, and a two-sided bootstrap p-value (twice the smaller tail share of replicate
    deltas on either side of 0, floored at ``1 / replicates``).

    ``points``: the two quantiles as the store computes them exactly (DuckDB's ``quantile_cont``).
    They are the point values, and the replicate deltas are moved by the difference between their
    delta and the bins' (the bins give the spread, not the location): a small sample's binned
    quantile, read at rank ``q·n`` inside a bin, sits a few percent from the interpolated one.
    """
    ca = np.asarray(counts_a, dtype=np.int64)
    cb = np.asarray(counts_b, dtype=np.int64)
    edges = bins.edges()
    a = float(_quantiles_rows(ca, edges, q)[0])
    b = float(_quantiles_rows(cb, edges, q)[0])
    na, nb = int(ca.sum()), int(cb.sum())
    shift = 0.0
    if points is not None and na and nb:
        shift = (points[1] - points[0]) - (b - a)
        a, b = float(points[0]), float(points[1])
    if na == 0 or nb == 0:
        return (a, b, math.nan, math.nan, 1.0)
    rng = np.random.default_rng(seed)
    qa = _bootstrap_quantile(ca, edges, q, replicates, rng)
    qb = _bootstrap_quantile(cb, edges, q, replicates, rng)
    deltas = qb - qa + shift
    alpha = 1.0 - confidence
    lo, hi = np.quantile(deltas, [alpha / 2.0, 1.0 - alpha / 2.0])
    tail = min(float(np.mean(deltas <= 0.0)), float(np.mean(deltas >= 0.0)))
    p = min(1.0, max(2.0 * tail, 1.0 / replicates))
    return (a, b, float(lo), float(hi), p)


_WINDOW_SD = 6.0
"""Half-width, in standard errors of the quantile's level, of the bins a replicate redraws one by one."""


def _bootstrap_quantile(
    counts: npt.NDArray[np.int64], edges: npt.NDArray[np.float64], q: float, replicates: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Replicates of quantile ``q`` of a multinomial redraw of ``counts``.

    A replicate's quantile depends only on the bins near it and the total count below them, so the
    bins outside a window of ±6 standard errors of the level ``q`` are lumped into one bin below and
    one above (a multinomial draw of merged cells is the merged draw of the cells). A replicate
    leaves that window with probability below 1e-8; the cost is ``replicates × window`` bins, a
    handful at 1M rows.
    """
    n = int(counts.sum())
    cum = np.cumsum(counts) / n
    sd = math.sqrt(q * (1.0 - q) / n)
    lo_level = q - _WINDOW_SD * sd - 1.0 / n
    hi_level = q + _WINDOW_SD * sd + 1.0 / n
    first = int(np.searchsorted(cum, lo_level, side="left"))
    last = min(int(np.searchsorted(cum, hi_level, side="left")), len(counts) - 1)
    below = float(cum[first - 1]) if first > 0 else 0.0
    window = counts[first : last + 1] / n
    above = max(0.0, 1.0 - below - float(window.sum()))
    pvals = np.concatenate(([below], window, [above]))
    draws = rng.multinomial(n, pvals / pvals.sum(), size=replicates)
    lowers = np.concatenate(([edges[0]], edges[first : last + 1], [edges[last + 1]]))
    uppers = np.concatenate(([edges[first]], edges[first + 1 : last + 2], [edges[-1]]))
    return _quantiles_sparse(draws, lowers, uppers, q)


def _quantiles_sparse(
    counts: npt.NDArray[np.int64], lowers: npt.NDArray[np.float64], uppers: npt.NDArray[np.float64], q: float
) -> npt.NDArray[np.float64]:
    """Quantile ``q`` of each row of ``counts`` over bins ``[lowers[i], uppers[i])``, linear inside the bin."""
    cum = np.cumsum(counts, axis=1)
    totals = cum[:, -1]
    target = q * totals
    idx = np.argmax(cum >= target[:, None], axis=1)
    rows = np.arange(counts.shape[0])
    before = np.where(idx > 0, cum[rows, np.maximum(idx - 1, 0)], 0)
    in_bin = counts[rows, idx]
    frac = np.where(in_bin > 0, (target - before) / np.maximum(in_bin, 1), 0.0)
    out: npt.NDArray[np.float64] = lowers[idx] + np.clip(frac, 0.0, 1.0) * (uppers[idx] - lowers[idx])
    return out
