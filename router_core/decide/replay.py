"""Replaying a stored decision: what would this (or another) policy have chosen for the same request?

Everything ``decide`` reads is in the trace: the request features and intent, each candidate's
state snapshot (with its hysteresis latches), the time, and the request id that seeds ties and
sampling. Learned quality is state too: the values the trace scored with are reused, and the
policy's priors fill in what the trace did not score. Instances the new policy knows but the trace
has no state for count as never scraped.
"""

from __future__ import annotations

from dataclasses import dataclass

from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import DecisionContext
from router_core.decide.policy import Policy, build_policy
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.state.quality import QualityTable
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.trace import DecisionTrace

__all__ = ["Replay", "replay"]


@dataclass(frozen=True, slots=True)
class Replay:
    """The decision a policy makes on a stored request."""

    selected_model: str | None
    selected_instance: str | None
    ranked: list[str]
    trace: DecisionTrace


def replay(trace: DecisionTrace, policy: Policy | RouteLensConfig) -> Replay:
    """Decide ``trace``'s request again under ``policy``; no I/O, no clock."""
    pol = policy if isinstance(policy, Policy) else build_policy(policy, builtin_registry())
    state: dict[str, InstanceSnapshot] = {c.instance: c.state for c in trace.candidates if c.state is not None}
    for spec in pol.fleet:
        state.setdefault(spec.id, InstanceSnapshot(instance=spec.id, model=spec.model, engine=spec.engine))
    quality = dict(QualityTable(pol.models).snapshot())
    names = [w.name for w in trace.score_weights]
    if "quality" in names and trace.intent:
        at = names.index("quality")
        for cand in trace.candidates:
            if len(cand.score_terms) > at:
                quality[(cand.model, trace.intent)] = cand.score_terms[at]
    rec = TraceRecorder(request_id=trace.request_id, ts=trace.ts, router_version=trace.router_version,
                        policy_hash=pol.hash, query_hash=trace.query_hash, features=trace.features,
                        intent=trace.intent, intent_confidence=trace.intent_confidence)
    ctx = DecisionContext(request_id=trace.request_id, features=trace.features, intent=trace.intent, now=trace.ts,
                          quality=quality)
    decision = Router(pol).decide(ctx, state)
    rec.record_decision(decision)
    model, instance = rec.selected or (None, None)
    return Replay(model, instance, [s.id for s in decision.targets], rec.finish(trace.outcome))
