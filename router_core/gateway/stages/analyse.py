"""Stage 2, analyse and policy: the request's features, the arm that serves it, and what the policy makes of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from router_core.decide.analysis import Analysis
from router_core.decide.router import AUTO_MODEL, Router
from router_core.experiments import Experiment
from router_core.gateway.policy_gate import PolicyGate, Understood
from router_core.rules.ir import RuleSet
from schemas.fleet import InstanceSnapshot

__all__ = ["Lane", "lane", "runs", "understand", "unruled"]


@dataclass(frozen=True, slots=True)
class Lane:
    """Who decides a request: the router, the version label its trace carries, its arm, its policy gate.

    ``forced``: the arm was named by the request's forcing header, not assigned (its trace says so).
    """

    router: Router
    version: str
    arm: str | None
    gate: PolicyGate
    forced: bool = False


def lane(experiment: Experiment | None, base: Lane, gates: Mapping[str, PolicyGate], request_id: str,
         headers: Mapping[str, str], body: Any) -> Lane:
    """The arm that serves this request (``base`` without an experiment), with its own gate if it has one.

    Raises:
        InvalidRequest: The forcing header names no arm.
    """
    if experiment is None:
        return base
    arm, assignment = experiment.arms.pick(request_id, headers, body)
    return Lane(arm.router, arm.router_version, arm.name, gates.get(arm.name, base.gate), assignment.forced)


def runs(policy: PolicyGate, analysis: Analysis) -> bool:
    """Whether the policy has anything to say on this request (rules, intents or keywords; a request for ``auto``)."""
    return policy.active and analysis.features.requested_model == AUTO_MODEL


def unruled(analysis: Analysis) -> Understood:
    """What a request no policy runs for is understood as: the analysis's own intent, no rule."""
    return Understood(analysis.intent.cls, analysis.intent.confidence, None, {})


async def understand(policy: PolicyGate, analysis: Analysis, body: Any, headers: Mapping[str, str], now: datetime,
                     state: Callable[[], Mapping[str, InstanceSnapshot]], *, rules: RuleSet | None = None,
                     explain: Literal["matched", "all"] = "matched") -> Understood:
    """Intent, keywords and the rule matched; the analysis's own intent when no policy runs for this request.

    ``rules`` stands in for the live rule set and ``explain="all"`` records every rule tried (a dry run).
    """
    if (policy.active or rules is not None) and analysis.features.requested_model == AUTO_MODEL:
        return await policy.understand(analysis, body, headers, now, state, rules=rules, explain=explain)
    return unruled(analysis)
