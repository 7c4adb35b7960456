"""Replaying a stored decision: what would this (or another) policy have chosen for the same request?

Everything ``decide`` reads is in the trace or in the policy stored under its hash: the request
features and intent, each candidate's state snapshot (with its hysteresis latches), the time, the
request id that seeds ties and sampling, and what the gateway settled (``trace.inputs``: the
router's mode and turn, the session's instance, the budget, the breakers that blocked instances).
The matched rule is taken from the trace's policy step and looked up, by name, in the rule set
given (the query that matched it is never stored): rules, chains, guarantees, degraded targets and
``cost_params`` then run as they did live. Learned quality is state too: the values the trace
scored with are reused, per instance (an instance its feedback flagged divergent scores apart from
its siblings), and the policy's priors fill in what the trace did not score. Instances
the policy knows but the trace has no state for count as never scraped.

What cannot be re-decided raises :class:`NotReplayable` with its reason, never a guess.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime

from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import Decision, DecisionContext
from router_core.decide.policy import Policy, build_policy
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.framework import Blocked
from router_core.resilience.budgets import BudgetView
from router_core.resilience.router_modes import ModeChoice
from router_core.rules.ir import ClauseVerdict, Match, Rule, RuleSet
from router_core.rules.load import load_policy
from router_core.rules.route import KEYWORDS_RULE, NO_RULES, RouteChoice, keyword_rule
from router_core.state.quality import QualitySnapshot, QualityTable
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.trace import DecisionTrace
from schemas.trace_inputs import DecisionInputs

__all__ = ["NotReplayable", "Replay", "context_of", "redecide", "replay", "route_of", "settled"]



class NotReplayable(Exception):
    """A stored trace that cannot be re-decided; the message is the reason, as counted."""


@dataclass(frozen=True, slots=True)
class Replay:
    """The decision a policy makes on a stored request."""

    selected_model: str | None
    selected_instance: str | None
    ranked: list[str]
    trace: DecisionTrace


def route_of(rule_name: str | None, target: str | None, throttled: str | None, inputs: DecisionInputs,
             rules: RuleSet | None, ts: datetime, tried: tuple[ClauseVerdict, ...] = ()) -> RouteChoice:
    """The route a stored policy step describes, with ``rules`` (the policy's rule set) in force.

    What the throttle did is kept (it decides the levels tried), but not how long the request
    waited for a token (the step's ``waited_s``): a replay takes no token and waits for none.

    Raises:
        NotReplayable: The rule it names is not in ``rules``.
    """
    rule: Rule | None = None
    if rule_name == KEYWORDS_RULE and (rules is None or all(r.name != KEYWORDS_RULE for r in rules.rules)):
        rule = keyword_rule(target)
    elif rule_name is not None:
        rule = next((r for r in (rules.rules if rules is not None else ()) if r.name == rule_name), None)
        if rule is None:
            raise NotReplayable("the rule it matched is not in the policy")
    hour = inputs.local_hour if inputs.local_hour is not None else ts.hour
    return RouteChoice(rules or NO_RULES, Match(rule, tried), hour, skip_primary=inputs.skip_primary,
                       throttled=throttled)


def settled(inputs: DecisionInputs) -> tuple[ModeChoice | None, BudgetView | None, dict[str, Blocked] | None]:
    """The router's mode, the budget and the blocked instances as the live decision saw them."""
    m, b = inputs.mode, inputs.budget
    mode = None if m is None else ModeChoice(m.mode, seq=m.seq, safe_model=m.safe_model, reason=m.reason,
                                             weights={w.model: w.weight for w in m.weights})
    budget = None if b is None else BudgetView(band=b.band, use=b.use, cost_factor=b.cost_factor,
                                               stopped=frozenset(b.stopped), governs_all=b.governs_all,
                                               reason=b.reason)
    blocked = {x.instance: Blocked(x.scope, x.state, x.reason) for x in inputs.blocked} or None
    return mode, budget, blocked


def context_of(trace: DecisionTrace, policy: Policy, rules: RuleSet | None = None) -> DecisionContext:
    """The context the live decision had, rebuilt from the trace (``rules``: the policy's rule set).

    Raises:
        NotReplayable: The trace's rule is not in ``rules``.
    """
    inputs = trace.inputs or DecisionInputs()
    models = dict(QualityTable(policy.models).snapshot())
    scored: dict[tuple[str, str], float] = {}  # per instance: siblings flagged divergent score apart
    names = [w.name for w in trace.score_weights]
    if "quality" in names and trace.intent:
        at = names.index("quality")
        for cand in trace.candidates:
            if len(cand.score_terms) > at:
                models[(cand.model, trace.intent)] = scored[(cand.instance, trace.intent)] = cand.score_terms[at]
    quality = QualitySnapshot(models, scored)
    step = trace.policy
    route = None if step is None else route_of(
        step.rule, step.target, step.throttled, inputs, rules, trace.ts,
        tuple(ClauseVerdict(t.rule, t.matched, list(t.detail)) for t in step.tried))
    mode, budget, blocked = settled(inputs)
    return DecisionContext(request_id=trace.request_id, features=trace.features, intent=trace.intent, now=trace.ts,
                           quality=quality, blocked=blocked, route=route, mode=mode, affinity=inputs.affinity,
                           budget=budget)


def _states(trace: DecisionTrace, policy: Policy) -> dict[str, InstanceSnapshot]:
    state: dict[str, InstanceSnapshot] = {c.instance: c.state for c in trace.candidates if c.state is not None}
    for spec in policy.fleet:
        state.setdefault(spec.id, InstanceSnapshot(instance=spec.id, model=spec.model, engine=spec.engine))
    return state


_ROUTERS = threading.local()  # this thread's last (policy, its router): a window replays under one policy


def _router_of(policy: Policy) -> Router:
    """The router of ``policy``, built once per policy and thread, as the gateway keeps one for every request.

    A router holds no state of a decision: only its memos of prepared candidates, keyed by snapshot
    identity (the snapshot kept with its value), so a replay is the same with a new router or this one.
    """
    last: tuple[Policy, Router] | None = getattr(_ROUTERS, "last", None)
    if last is None or last[0] is not policy:
        last = _ROUTERS.last = (policy, Router(policy))
    return last[1]


def redecide(trace: DecisionTrace, policy: Policy, rules: RuleSet | None = None) -> Decision:
    """Decide ``trace``'s request again under ``policy`` and ``rules``, as the gateway did; no I/O, no clock.

    A decision the gateway took again after capping ``max_tokens`` (a degraded step) is taken
    again the same way.

    Raises:
        NotReplayable: The trace's rule is not in ``rules``.
        UnknownModel: The policy's fleet does not serve the requested model.
    """
    ctx = context_of(trace, policy, rules)
    router = _router_of(policy)
    state = _states(trace, policy)
    decision = router.decide(ctx, state)
    cap = next((s for s in trace.decision_trace if s.step == "degrade/cap_max_tokens" and s.value is not None
                and "still no feasible" not in s.reason), None)
    if cap is not None and not decision.targets:
        feats = trace.features.model_copy(update={"max_tokens": int(cap.value or 0)})
        again = replace(ctx, features=feats)
        decision = router.decide(again, state)
    return decision


def replay(trace: DecisionTrace, policy: Policy | RouteLensConfig, rules: RuleSet | None = None) -> Replay:
    """Decide ``trace``'s request again under ``policy`` (and its rule set); no clock.

    A configuration given without ``rules`` brings its own: its routing file is read (and
    compiled) when it names one.

    Raises:
        NotReplayable: The trace's rule is not in ``rules``.
        PolicyError: The configuration's routing file does not load.
    """
    if isinstance(policy, RouteLensConfig) and rules is None and policy.routing.policy:
        rules = load_policy(policy.routing.policy, policy)
    pol = policy if isinstance(policy, Policy) else build_policy(policy, builtin_registry())
    decision = redecide(trace, pol, rules)
    rec = TraceRecorder(request_id=trace.request_id, ts=trace.ts, router_version=trace.router_version,
                        policy_hash=pol.hash, query_hash=trace.query_hash, features=trace.features,
                        intent=trace.intent, intent_confidence=trace.intent_confidence)
    rec.record_decision(decision)
    model, instance = rec.selected or (None, None)
    return Replay(model, instance, [s.id for s in decision.targets], rec.finish(trace.outcome))
