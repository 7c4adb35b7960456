"""Two :class:`~schemas.experiments.ArmStats` to one :class:`~schemas.experiments.CompareReport`.

Both backends reduce each side to counts, sums and a binned latency histogram, then call
:func:`build_report`; what each metric's interval is, and why, is in :mod:`ingest.experiments.stats`.
Deltas are ``b - a``. Rate metrics read feedback (misroute, quality) over the feedback the side
received (one verdict per request: the store keeps the first), not over its requests, so their
guard counts feedback. Cost per request is the mean over every request of the side, a request
without a recorded cost (no instance served it) counting 0: the side's cost sum (what the Overview
and the series add up) over its requests. Latency quantiles take the store's exact quantiles as
their point values when it gives them (:data:`Exact`), the bins for the interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ingest.experiments.stats import (
    SRM_ALPHA,
    LogBins,
    bootstrap_quantile_diff,
    has_enough_data,
    holm,
    mean_diff_interval,
    newcombe_interval,
    srm_test,
    two_proportion_p,
    z_for,
)
from schemas.experiments import METRICS, ArmStats, CompareQuery, CompareReport, LatencyHistogram, MetricComparison

__all__ = ["BINS", "QUANTILES", "SRM_LEAD", "UNKNOWN_SHARES", "Exact", "assumed_even_split", "build_report",
           "empty_histogram", "histogram_of"]

SRM_LEAD = "SAMPLE RATIO MISMATCH (p < 0.001): the split is not the design; do not trust the deltas. "
"""How a verdict begins when the split is not the designed one (``srm_flag``)."""
UNKNOWN_SHARES = "designed shares unknown, assumed 50/50"
"""What a verdict says when no designed shares were given (:func:`assumed_even_split`)."""

BINS = LogBins()
"""The latency bins every backend fills (``outcome.total_ms``)."""
QUANTILES = {"latency_p50_ms": 0.5, "latency_p95_ms": 0.95}
"""The latency metrics and their levels."""
Exact = Mapping[str, Mapping[float, float | None]]
"""Per side, its exact latency quantile per level (the store's ``quantile_cont``), for the point values."""


def empty_histogram(bins: LogBins = BINS) -> LatencyHistogram:
    """Return a histogram of no requests over ``bins``."""
    return LatencyHistogram(lo=bins.lo, hi=bins.hi, k=bins.k)


def histogram_of(counts: dict[int, int], bins: LogBins = BINS) -> LatencyHistogram:
    """Return the histogram of sparse ``{bin: count}`` over ``bins``."""
    return LatencyHistogram(lo=bins.lo, hi=bins.hi, k=bins.k, counts={int(k): int(v) for k, v in counts.items() if v})


def _bins(h: LatencyHistogram) -> LogBins:
    return LogBins(lo=h.lo, hi=h.hi, k=h.k)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _rate(kind_n: tuple[int, int, int, int], z: float, guard: int) -> MetricComparison:
    s_a, n_a, s_b, n_b = kind_n
    a = s_a / n_a if n_a else None
    b = s_b / n_b if n_b else None
    if not (n_a and n_b):
        return MetricComparison(kind="rate", a=a, b=b, delta=None, ci=None, n_a=n_a, n_b=n_b, enough_data=False,
                                note="no observations on one side")
    lo, hi = newcombe_interval(s_a, n_a, s_b, n_b, z)
    return MetricComparison(kind="rate", a=a, b=b, delta=s_b / n_b - s_a / n_a, ci=(lo, hi),
                            p=two_proportion_p(s_a, n_a, s_b, n_b), n_a=n_a, n_b=n_b,
                            enough_data=has_enough_data(n_a, n_b, guard))


def _cost(sa: ArmStats, sb: ArmStats, z: float, guard: int) -> MetricComparison:
    """Cost per request: the mean over every request (``cost_mean``, a request without a cost counting 0)."""
    n_a, n_b = sa.requests, sb.requests
    if not (sa.cost_n and sb.cost_n) or sa.cost_mean is None or sb.cost_mean is None:
        return MetricComparison(kind="mean", a=sa.cost_mean, b=sb.cost_mean, delta=None, ci=None, n_a=n_a,
                                n_b=n_b, enough_data=False, note="no recorded cost on one side")
    lo, hi, p = mean_diff_interval(sa.cost_mean, sa.cost_var or 0.0, n_a, sb.cost_mean, sb.cost_var or 0.0, n_b, z)
    note = "mean over every request (the cost sum / requests)"
    if sa.cost_n < n_a or sb.cost_n < n_b:
        note += f"; {n_a - sa.cost_n:,} / {n_b - sb.cost_n:,} without a recorded cost (none served them) count 0"
    return MetricComparison(kind="mean", a=sa.cost_mean, b=sb.cost_mean, delta=sb.cost_mean - sa.cost_mean,
                            ci=(lo, hi), p=p, n_a=n_a, n_b=n_b, enough_data=has_enough_data(n_a, n_b, guard),
                            note=note)


def _quantile(sa: ArmStats, sb: ArmStats, q: float, query: CompareQuery,
              points: tuple[float | None, float | None]) -> MetricComparison:
    bins = _bins(sa.latency)
    ca, cb = bins.from_sparse(sa.latency.counts), bins.from_sparse(sb.latency.counts)
    n_a, n_b = int(ca.sum()), int(cb.sum())
    if not (n_a and n_b):
        return MetricComparison(kind="quantile", a=None, b=None, delta=None, ci=None, n_a=n_a, n_b=n_b,
                                enough_data=False, note="no requests on one side")
    exact = None if points[0] is None or points[1] is None else (points[0], points[1])
    a, b, lo, hi, p = bootstrap_quantile_diff(ca, cb, bins, q, replicates=query.replicates,
                                              confidence=query.confidence, seed=query.seed, points=exact)
    lead = "the requests' own quantile; interval: " if exact is not None else ""
    return MetricComparison(kind="quantile", a=a, b=b, delta=b - a, ci=(lo, hi), p=p, n_a=n_a, n_b=n_b,
                            enough_data=has_enough_data(n_a, n_b, query.min_samples),
                            note=f"{lead}bootstrap ({query.replicates} replicates) on {bins.k} log bins "
                                 f"(±{(bins.ratio - 1) * 100:.2f}%)")


def build_report(query: CompareQuery, sa: ArmStats, sb: ArmStats, exact: Exact | None = None) -> CompareReport:
    """Compare ``sa`` (the query's ``a``) with ``sb`` metric by metric.

    Metrics without enough data on either side keep their values and interval but take no part in
    the Holm correction and are never significant. ``exact``: each side's exact latency quantiles
    (keyed by ``sa.value`` and ``sb.value``), the point values of the latency metrics.
    """
    def points(q: float) -> tuple[float | None, float | None]:
        return ((exact or {}).get(sa.value, {}).get(q), (exact or {}).get(sb.value, {}).get(q))

    if sa.latency.model_dump(exclude={"counts"}) != sb.latency.model_dump(exclude={"counts"}):
        raise ValueError("both sides must be binned alike")
    z = z_for(query.confidence)
    guard = query.min_samples
    metrics: dict[str, MetricComparison] = {
        "error_rate": _rate((sa.errors, sa.requests, sb.errors, sb.requests), z, guard),
        "fallback_rate": _rate((sa.fallbacks, sa.requests, sb.fallbacks, sb.requests), z, guard),
        "latency_p50_ms": _quantile(sa, sb, QUANTILES["latency_p50_ms"], query, points(QUANTILES["latency_p50_ms"])),
        "latency_p95_ms": _quantile(sa, sb, QUANTILES["latency_p95_ms"], query, points(QUANTILES["latency_p95_ms"])),
        "cost_per_request": _cost(sa, sb, z, guard),
        "misroute_rate": _rate((sa.misroutes, sa.feedback, sb.misroutes, sb.feedback), z, guard),
        "quality_score": _rate((sa.expected_match, sa.expected, sb.expected_match, sb.expected), z, guard),
    }
    assert list(metrics) == list(METRICS)
    if metrics["quality_score"].note is None and metrics["quality_score"].n_a:
        metrics["quality_score"] = metrics["quality_score"].model_copy(
            update={"note": "share of graded feedback whose expected model was the one routed to"})
    enough = has_enough_data(sa.requests, sb.requests, guard)
    tested = {k: m.p for k, m in metrics.items() if m.enough_data and m.p is not None and enough}
    adjusted = holm(tested, query.alpha)
    out: dict[str, MetricComparison] = {}
    for name, m in metrics.items():
        p_adj, sig = adjusted.get(name, (None, False))
        ci = None if m.ci is None else (_finite(m.ci[0]), _finite(m.ci[1]))
        out[name] = m.model_copy(update={
            "a": _finite(m.a), "b": _finite(m.b), "delta": _finite(m.delta),
            "ci": None if ci is None or None in ci else ci, "p_adjusted": p_adj, "significant_after_correction": sig,
        })
    srm_p = srm_test(sa.requests, sb.requests, *query.shares) if sa.requests + sb.requests else None
    srm_flag = srm_p is not None and srm_p < SRM_ALPHA
    return CompareReport(
        a=query.a, b=query.b, by=query.by, start=query.start, end=query.end, n_a=sa.requests, n_b=sb.requests,
        forced_a=sa.forced, forced_b=sb.forced, shares=query.shares, srm_p=srm_p, srm_flag=srm_flag,
        enough_data=enough, verdict=_verdict(enough, srm_flag, out, guard) + _left_out(sa.forced + sb.forced),
        confidence=query.confidence, metrics=out,
    )


def _left_out(forced: int) -> str:
    """What the verdict adds when requests forced onto an arm were left out (nothing when none were)."""
    if not forced:
        return ""
    return f" ({forced:,} request{'s' if forced != 1 else ''} forced onto an arm by header left out)"


def _verdict(enough: bool, srm: bool, metrics: dict[str, MetricComparison], guard: int) -> str:
    if not enough:
        return f"not enough data: fewer than {guard} requests on one side"
    moved = [k for k, m in metrics.items() if m.significant_after_correction]
    lead = SRM_LEAD if srm else ""
    if not moved:
        return lead + "no metric differs significantly after Holm correction"
    return lead + f"{len(moved)} metric(s) differ after Holm correction: {', '.join(moved)}"


def assumed_even_split(report: CompareReport) -> CompareReport:
    """``report`` of a query whose designed shares were not given (``shares`` left at 50/50), said as such.

    Whoever asked does not know the design (the store does not: the arms' shares are in the
    gateway's configuration), so a split far from 50/50 is no mismatch: ``srm_flag`` is False and
    the verdict says :data:`UNKNOWN_SHARES` where it would begin with :data:`SRM_LEAD` (after "not
    enough data" when that is the verdict); ``srm_p`` stays the p-value against 50/50, for whoever
    knows the design is even.
    """
    rest = report.verdict.removeprefix(SRM_LEAD)
    if UNKNOWN_SHARES in rest:
        return report
    said = f"{UNKNOWN_SHARES}: the split ({report.n_a:,} / {report.n_b:,}) is not checked against a design"
    verdict = f"{said}. {rest}" if report.enough_data else f"{rest}; {said}"  # "not enough data" first
    return report.model_copy(update={"srm_flag": False, "verdict": verdict})
