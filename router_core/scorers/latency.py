"""Predicted latency under current load, against the latency SLO."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.config import ModelProfile

__all__ = ["LatencyScorer", "predicted_latency_ms"]


def predicted_latency_ms(c: Candidate, profile: ModelProfile) -> float:
    """Base latency (observed window median when there is one, else the model profile) scaled by load.

    Each waiting request adds one service time per slot; running beyond capacity counts as waiting.
    """
    base = c.state.p50_latency_ms if c.state.window_requests >= 5 and c.state.p50_latency_ms else profile.latency_ms
    eff = c.eff
    backlog = eff.queue + max(eff.running - profile.max_concurrency, 0.0)
    return base * (1.0 + backlog / profile.max_concurrency)


class LatencyScorer(PluginBase):
    """Scores predicted latency against the SLO.

    What it does: ``1 - predicted / latency_slo_ms`` (0 at or beyond the SLO).
    Inputs: observed latency window, model profile, queue and running gauges.
    Parameters: ``latency_slo_ms`` (derived from ``scoring.latency_slo_ms``). Category: scorer, term ``latency``.
    """

    TYPE: ClassVar[str] = "latency-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "latency"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`LatencyScorer`."""

        latency_slo_ms: float = Field(3000.0, gt=0, description="A predicted latency this high scores 0.")

    params: Params

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the latency term per candidate."""
        slo, profile = self.params.latency_slo_ms, self.handle.profile
        return [1.0 - predicted_latency_ms(c, profile(c.spec.model)) / slo for c in pool]
