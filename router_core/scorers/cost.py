"""Cheaper instances first, relative to the pool: the cheapest scores 1, the dearest 0, at the request's price."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from router_core.rules.route import PeakHours, expected_tokens, priced

__all__ = ["CostScorer"]


class CostScorer(PluginBase):
    """Scores relative cheapness at the price of this request.

    What it does: ``(max - price) / (max - min)`` over the pool's prices of this request (all equal:
    all 1). An instance's price is ``cost.base`` plus, with token prices, the request's estimated
    input tokens and its expected completion tokens at them (:func:`expected_tokens`), times
    ``cost.surge_multiplier`` when the request's time (``ctx.now``: the injected clock live, the
    trace's ``ts`` in a replay) falls in ``routing.peak_hours``, read in ``routing.timezone``.
    Whether the request is in a peak hour is decided once per request, not per candidate. Inputs:
    ``InstanceSpec.cost``, ``ctx.now``, ``ctx.features`` (``est_input_tokens``, ``max_tokens``).
    Parameters: none (the peak hours are the policy's, set by ``build_policy``; a scorer built
    alone prices off-peak).
    Category: scorer, term ``cost``.
    """

    TYPE: ClassVar[str] = "cost-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "cost"
    STATE_ONLY: ClassVar[bool] = False
    peak_hours: PeakHours | None = None  # the policy's routing.peak_hours (None: no peak premium)

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the relative cheapness per candidate, at the request's per-request prices."""
        peak = self.peak_hours is not None and self.peak_hours.at(ctx.now)  # once per request
        f = ctx.features
        costs = [priced(c.spec.cost, peak, *expected_tokens(c.spec.cost, f)) if c.spec.cost.per_token
                 else priced(c.spec.cost, peak) for c in pool]
        low, high = min(costs, default=0.0), max(costs, default=0.0)
        if high == low:
            return [1.0] * len(pool)
        return [(high - cost) / (high - low) for cost in costs]
