"""Comparing two experiment arms, router versions or policies: the query, per-arm figures, the report.

A backend reduces each side of a comparison to an :class:`ArmStats` (counts, sums and a binned
latency histogram; never the rows); :mod:`ingest.experiments.compare` turns two of them into a
:class:`CompareReport`. The report's JSON keeps the shape outside checks rely on:
``{"a", "b", "n_a", "n_b", "srm_p", "metrics": {NAME: {"a", "b", "delta", "ci": [lo, hi]}}}``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field, model_validator

from schemas.common import ContractModel

__all__ = [
    "COMPARE_BY",
    "METRICS",
    "ArmStats",
    "CompareBy",
    "CompareQuery",
    "CompareReport",
    "IpsEstimate",
    "LatencyHistogram",
    "MetricComparison",
    "MetricKind",
]

CompareBy = Literal["arm", "version", "policy"]
COMPARE_BY: dict[str, str] = {"arm": "experiment_arm", "version": "router_version", "policy": "policy_hash"}
"""What ``by`` compares, and the trace field that holds it."""

MetricKind = Literal["rate", "mean", "quantile"]
METRICS: dict[str, MetricKind] = {
    "error_rate": "rate",
    "fallback_rate": "rate",
    "latency_p50_ms": "quantile",
    "latency_p95_ms": "quantile",
    "cost_per_request": "mean",
    "misroute_rate": "rate",
    "quality_score": "rate",
}
"""Every metric of a comparison, in report order, and how its interval is computed."""


class CompareQuery(ContractModel):
    """Compare ``a`` with ``b`` (arms, router versions or policy hashes) over ``[start, end)``."""

    a: str = Field(min_length=1, max_length=200)
    b: str = Field(min_length=1, max_length=200)
    by: CompareBy = "arm"
    start: datetime
    end: datetime
    shares: tuple[float, float] = Field((0.5, 0.5), description="Designed traffic shares of a and b (for SRM).")
    min_samples: int = Field(100, ge=1, description="Fewest requests per side before a verdict.")
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    alpha: float = Field(0.05, gt=0.0, lt=1.0, description="Family-wise error rate of the Holm correction.")
    replicates: int = Field(1000, ge=100, le=20_000, description="Bootstrap replicates for quantiles.")
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> CompareQuery:
        for name in ("start", "end"):
            if getattr(self, name).tzinfo is None:
                raise ValueError(f"{name} must carry a time zone")
        if self.end <= self.start:
            raise ValueError("end must be after start")
        if self.a == self.b:
            raise ValueError("a and b must differ")
        if min(self.shares) <= 0:
            raise ValueError("designed shares must be positive")
        return self


class LatencyHistogram(ContractModel):
    """Counts of ``outcome.total_ms`` over log-spaced bins (``ingest.experiments.stats.LogBins``)."""

    lo: float = Field(gt=0)
    hi: float = Field(gt=0)
    k: int = Field(ge=1)
    counts: dict[int, int] = Field(default={}, description="Bin index -> requests; empty bins are left out.")


class ArmStats(ContractModel):
    """One side of a comparison, reduced to what its statistics need."""

    value: str
    requests: int = Field(0, ge=0)
    errors: int = Field(0, ge=0)
    fallbacks: int = Field(0, ge=0)
    cost_n: int = Field(0, ge=0, description="Requests with a recorded cost.")
    cost_mean: float | None = None
    cost_var: float | None = Field(None, description="Sample variance of cost (n - 1 denominator).")
    latency: LatencyHistogram
    feedback: int = Field(0, ge=0)
    misroutes: int = Field(0, ge=0, description="Feedback with correct=false (as the store counts misroutes).")
    expected: int = Field(0, ge=0, description="Feedback naming the model the request should have gone to.")
    expected_match: int = Field(0, ge=0, description="... of which the request went to that model.")
    forced: int = Field(0, ge=0, description="Requests forced onto this side by the arm-forcing header, left out "
                                             "of every figure above (and their feedback).")


class MetricComparison(ContractModel):
    """One metric of both sides: the values, ``delta = b - a``, its interval and the corrected verdict."""

    kind: MetricKind
    a: float | None
    b: float | None
    delta: float | None
    ci: tuple[float, float] | None = Field(description="Interval of the delta at the query's confidence.")
    p: float | None = None
    p_adjusted: float | None = Field(None, description="Holm-adjusted p-value across the report's metrics.")
    significant_after_correction: bool = False
    n_a: int = Field(0, ge=0, description="Observations behind a (requests, or feedback for feedback metrics).")
    n_b: int = Field(0, ge=0)
    enough_data: bool = True
    note: str | None = None


class IpsEstimate(ContractModel):
    """A self-normalised inverse-propensity estimate of a candidate policy's mean from logged traffic."""

    value: float | None
    ci: tuple[float, float] | None
    n: int = Field(ge=0, description="Logged requests used (with a selection probability).")
    matched: int = Field(ge=0, description="... of which the candidate gave the logged choice a non-zero probability.")
    effective_n: float = Field(ge=0, description="Kish effective sample size of the importance weights.")
    logged_mean: float | None = Field(None, description="The plain mean of the same requests, as logged.")
    note: str | None = None


class CompareReport(ContractModel):
    """Two sides compared metric by metric, with the split check and the data guard."""

    a: str
    b: str
    by: CompareBy
    start: datetime
    end: datetime
    n_a: int = Field(ge=0)
    n_b: int = Field(ge=0)
    forced_a: int = Field(0, ge=0, description="Requests forced onto a by the arm-forcing header: not in n_a, "
                                               "the split check or any metric.")
    forced_b: int = Field(0, ge=0, description="The same for b.")
    shares: tuple[float, float]
    srm_p: float | None = Field(description="Chi-square p-value of the split against the designed shares.")
    srm_flag: bool = Field(description="srm_p below 0.001: the split is not the design; distrust the deltas.")
    enough_data: bool = Field(description="Both sides reach min_samples; otherwise no verdict is given.")
    verdict: str = Field(description="One line for a person: not enough data, SRM, or how many metrics moved.")
    confidence: float
    correction: Literal["holm"] = "holm"
    metrics: dict[str, MetricComparison]
    ips: dict[str, IpsEstimate] = {}
