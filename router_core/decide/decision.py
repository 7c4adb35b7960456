"""What ``Router.decide`` decides on (``DecisionContext``) and what it concluded (``Decision``), as values.

Candidates, score weights and steps are plain dicts in the trace's field names: they are validated
once, when :class:`router_core.decide.recorder.TraceRecorder` builds the ``DecisionTrace`` (one pass in
pydantic-core instead of hundreds of small model constructions on the request path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router_core.framework.types import RequestContext
from router_core.resilience.budgets import BudgetView
from router_core.resilience.router_modes import ModeChoice
from router_core.rules.ir import DegradedTarget
from router_core.rules.route import RouteChoice
from schemas.common import RoutingMode
from schemas.fleet import InstanceSpec

__all__ = ["Decision", "DecisionContext", "Steps"]


@dataclass(frozen=True, slots=True)
class DecisionContext(RequestContext):
    """What one decision depends on besides the candidates and the plugins' own parameters; no I/O.

    The plugins' :class:`~router_core.framework.RequestContext` (request id, features, intent,
    time, quality), and what the gateway's state machines settled for this request, which the
    router reads and the plugins do not.

    Attributes:
        route: The routing rule that matched and what its throttle did (None: no policy file,
            or a request for a named model).
        mode: The router's own breaker mode (static: round robin; safe: the stable model) and
            its round-robin position (None: normal).
        affinity: The instance the request's session is bound to (None: no session).
        budget: The cost budget in force: the cost weight's factor, the models stopped (None: none).
    """

    route: RouteChoice | None = None
    mode: ModeChoice | None = None
    affinity: str | None = None
    budget: BudgetView | None = None

    def inputs(self) -> dict[str, Any] | None:
        """What the gateway settled for this decision, in ``schemas.trace_inputs.DecisionInputs``'s field names.

        With the features, the states and the stored policy, all a replay needs to decide again
        exactly (None: nothing beyond them was read).
        """
        route, mode, budget, blocked = self.route, self.mode, self.budget, self.blocked
        if route is None and mode is None and self.affinity is None and budget is None and not blocked:
            return None
        return {
            "local_hour": None if route is None else route.local_hour,
            "skip_primary": route is not None and route.skip_primary,
            "mode": None if mode is None else {
                "mode": mode.mode, "seq": mode.seq, "safe_model": mode.safe_model, "reason": mode.reason,
                "weights": [{"model": m, "weight": w} for m, w in sorted(mode.weights.items())]},
            "affinity": self.affinity,
            "budget": None if budget is None else {
                "band": budget.band, "use": budget.use, "cost_factor": budget.cost_factor,
                "stopped": sorted(budget.stopped), "governs_all": budget.governs_all, "reason": budget.reason},
            "blocked": [{"instance": iid, "scope": b.scope, "state": b.state, "reason": b.reason}
                        for iid, b in sorted((blocked or {}).items())],
        }


@dataclass(frozen=True, slots=True)
class Decision:
    """One request's routing decision.

    Attributes:
        rule: Which rule applied (``auto`` or ``model:<name>``).
        targets: The instances to try, in attempt order (empty: nothing may serve).
        candidates: Every evaluated candidate: verdicts, state, score terms, total, rank.
        weights: The score terms in force, in ``score_terms`` order (``name``, ``weight``, ``scorer``).
        steps: The ordered decision steps, ``seq`` from 0.
        fallback_reason: Why the decision fell back (None: it did not).
        mode: Normal, or the degraded mode the decision ran in.
        decision_ms: Time spent deciding.
        selection_probability: The chance the picker's sampling rule gave the first target (1.0
            for a deterministic pick; None when there is nothing to try).
        degraded: The non-LLM target a rule's chain ends in, to answer from when no instance
            is feasible or every attempt failed (None: none).
        levels: The models a matched rule's chain went through, in order ("*" for every model).
        inputs: What the context settled besides features and states (:meth:`DecisionContext.inputs`).
        no_feasible: Nothing among the request's candidates was feasible: what the router did then,
            ``fallback_model`` (its instances were), ``fail_open``, ``reject``, ``degraded`` (a
            rule chain's non-LLM end) or ``context_length_exceeded`` (failing open, no instance's
            window holds the request: a 400). None: something was feasible.
    """

    rule: str
    targets: tuple[InstanceSpec, ...]
    candidates: tuple[dict[str, Any], ...]
    weights: tuple[dict[str, Any], ...]
    steps: tuple[dict[str, Any], ...]
    fallback_reason: str | None
    mode: RoutingMode
    decision_ms: float
    selection_probability: float | None = None
    degraded: DegradedTarget | None = None
    levels: tuple[str, ...] = ()
    inputs: dict[str, Any] | None = None
    no_feasible: str | None = None

    @property
    def selected(self) -> InstanceSpec | None:
        """The first choice (None when there is nothing to try)."""
        return self.targets[0] if self.targets else None


class Steps(list[dict[str, Any]]):
    """The ordered steps of a trace, as dicts in ``DecisionStep``'s field names; ``seq`` is the position."""

    def add(self, step: str, kind: Any, *, value: float | None = None, reason: str = "", plugin: str | None = None,
            instances: list[str] | None = None, rejected: list[str] | None = None,
            duration_us: float | None = None) -> None:
        """Append one step."""
        self.append({
            "seq": len(self), "step": step, "kind": kind, "value": value, "reason": reason, "plugin": plugin,
            "instances": instances or [], "rejected": rejected or [], "duration_us": duration_us,
        })
