"""Predicted latency under current load, against the latency SLO."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, DecisionContext
from router_core.scorers._common import profile_of

__all__ = ["LatencyScorer", "predicted_latency_ms"]


def predicted_latency_ms(c: Candidate, ctx: DecisionContext) -> float:
    """Base latency (observed window median when there is one, else the model profile) scaled by load.

    Each waiting request adds one service time per slot; running beyond capacity counts as waiting.
    """
    profile = profile_of(c, ctx)
    base = c.state.p50_latency_ms if c.state.window_requests >= 5 and c.state.p50_latency_ms else profile.latency_ms
    eff = c.eff
    backlog = eff.queue + max(eff.running - profile.max_concurrency, 0.0)
    return base * (1.0 + backlog / profile.max_concurrency)


class LatencyScorer:
    """Scores predicted latency against the SLO.

    What it does: ``1 - predicted / latency_slo_ms`` (0 at or beyond the SLO).
    Inputs: observed latency window, model profile, queue and running gauges.
    Parameters: ``scoring.latency_slo_ms``. Category: scorer, term ``latency``.
    """

    TYPE: ClassVar[str] = "latency-scorer"
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, name: str = "latency") -> None:
        self.name = name

    def score(self, pool: Sequence[Candidate], ctx: DecisionContext) -> list[float]:
        """Return the latency term per candidate."""
        slo = ctx.scoring.latency_slo_ms
        return [1.0 - predicted_latency_ms(c, ctx) / slo for c in pool]
