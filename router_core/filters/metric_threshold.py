"""A hard constraint on one scraped or observed gauge: ``metric op threshold``."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import ClassVar

from router_core.framework import Candidate
from schemas.config import ConstraintSpec
from schemas.trace import RequestFeatures, Violation

__all__ = ["MetricThresholdFilter"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}


class MetricThresholdFilter:
    """Keeps instances whose ``metric`` satisfies ``op threshold``.

    What it does: compares one gauge of the instance snapshot with a bound.
    Inputs consumed: ``InstanceSnapshot.<metric>``; a missing value fails (no data counts as
    saturated), except ``error_rate``, which is unknown until the router has sent traffic.
    Parameters: :class:`schemas.config.ConstraintSpec`.
    Category: filter.
    """

    TYPE: ClassVar[str] = "metric-threshold-filter"

    def __init__(self, spec: ConstraintSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self._test = _OPS[spec.op]

    def check(self, candidate: Candidate, features: RequestFeatures) -> Violation | None:
        """Return a violation when the gauge is missing or out of bounds."""
        spec = self.spec
        value = getattr(candidate.state, spec.metric)
        if value is None:
            if spec.metric == "error_rate":
                return None
            reason = f"no {spec.metric} data"
        elif self._test(value, spec.threshold):
            return None
        else:
            reason = f"{spec.metric} {value:.4g} breaks {spec.op} {spec.threshold:g}"
        return Violation(
            constraint=spec.name,
            metric=spec.metric,
            op=spec.op,
            value=value,
            threshold=spec.threshold,
            reason=reason,
        )
