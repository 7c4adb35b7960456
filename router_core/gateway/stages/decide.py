"""Stage 4, decide: the router's decision on the in-flight-adjusted state, and the shadow's job for later.

The shadow decides on the very context and state the live decision had, after the answer has
left (see :class:`router_core.gateway.finisher.TraceFinisher`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.router import Router
from router_core.experiments import Experiment
from router_core.experiments.shadow import ShadowJob
from router_core.state.inflight import InflightCounter
from router_core.state.view import StateView
from schemas.fleet import InstanceSnapshot

__all__ = ["Decided", "decide"]


@dataclass(frozen=True, slots=True)
class Decided:
    """The decision, the state it was made on, and the shadow decision still to make (None: not sampled)."""

    decision: Decision
    state: Mapping[str, InstanceSnapshot]
    shadow: ShadowJob | None


def decide(router: Router, ctx: DecisionContext, view: StateView, inflight: InflightCounter,
           experiment: Experiment | None, *, decided: Decision | None = None,
           shadow_ctx: DecisionContext | None = None) -> Decided:
    """Decide (or take ``decided``, a degraded step's new decision) on the state as this process sees it now.

    ``shadow_ctx``: the context the shadow decides on when its own rules routed the request (None: ``ctx``).
    """
    state = inflight.adjust(view.snapshot())
    decision = decided or router.decide(ctx, state)
    shadow = None if experiment is None or experiment.shadow is None else experiment.shadow.job(
        shadow_ctx or ctx, state, decision)
    return Decided(decision, state, shadow)
