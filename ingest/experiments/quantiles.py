"""Latency quantiles of two experiment arms from binned counts: the bins, the point values, the bootstrap.

Each arm arrives as counts over the same log-spaced bins (:class:`LogBins`, ~0.52% wide), which the
backends aggregate; nothing here touches storage, and the bootstrap is deterministic given its
``seed``. The point values are the store's own quantiles of the rows (DuckDB's ``quantile_cont``,
which the Overview shows; Elasticsearch's ``percentiles``); the interval is a bootstrap on the
binned representation, moved onto them. Each replicate redraws the counts from a multinomial with
the observed bin shares, and reads the quantile from the redrawn cumulative counts (rank ``q·n``),
interpolating linearly inside the bin. Only the bins within ±6 standard errors of the quantile's
level are redrawn one by one (the rest are two lumped cells, which is the same multinomial), so the
cost is ``O(replicates × window)``: a few dozen bins at 1M rows, whatever the number of rows. The
binned quantile differs from the interpolated one by the bin width (0.52%) plus the rank convention
(several percent at a few dozen rows, where the order statistics are far apart), which is why it
gives only the spread: the replicate deltas are moved by the difference between the exact delta and
the binned one, and the interval is their percentile interval.

:mod:`ingest.experiments.stats` hands these names on with the other statistics of a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["LogBins", "bootstrap_quantile_diff", "quantile_from_counts"]


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
