"""Evaluating hard constraints on live state: the metric value, its verdict and the soft ramp."""

from __future__ import annotations

import operator
from collections.abc import Callable

from router_core.framework import Effective
from schemas.config import ConstraintSpec
from schemas.fleet import InstanceSnapshot, InstanceSpec

__all__ = ["applies", "holds", "metric_value", "ramp_factor"]

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}


def applies(spec: ConstraintSpec, instance: InstanceSpec) -> bool:
    """Return True when the constraint's scope covers ``instance``."""
    return (not spec.models or instance.model in spec.models) and (
        not spec.instances or instance.id in spec.instances
    )


def metric_value(spec: ConstraintSpec, snap: InstanceSnapshot, eff: Effective) -> float | None:
    """Return the value a constraint judges: staleness-adjusted gauges, observed windows as they are."""
    if spec.metric == "kv_cache_usage":
        return eff.kv_cache_usage
    if spec.metric == "queue":
        return eff.queue
    if spec.metric == "running":
        return eff.running
    value: float | None = getattr(snap, spec.metric)
    return value


def holds(spec: ConstraintSpec, value: float | None, bound: float) -> bool:
    """Return True when ``value op bound`` holds. Unknown values hold only for the error rate."""
    if value is None:
        return spec.metric in ("error_rate", "p50_latency_ms", "p95_latency_ms", "ttft_p95_ms", "e2e_p95_ms")
    return _OPS[spec.op](value, bound)


def ramp_factor(spec: ConstraintSpec, value: float | None) -> float:
    """Return the score multiplier: 1 up to the soft threshold, falling linearly to 0 at the hard one."""
    soft = spec.soft_threshold
    if soft is None or value is None or soft == spec.threshold:
        return 1.0
    span = spec.threshold - soft  # negative for >= constraints, and the formula still holds
    return min(max(1.0 - (value - soft) / span, 0.0), 1.0)
