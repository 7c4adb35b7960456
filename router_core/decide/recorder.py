"""Collects a request's decision and attempts as values; :meth:`finish` validates them into one ``DecisionTrace``.

The router hands over a :class:`router_core.decide.decision.Decision`, the forwarder its
:class:`schemas.trace.Attempt` list; the recorder turns attempts into their trace steps and is the
only builder of the trace. Everything is kept as plain data and validated at the end (one pass in
pydantic-core instead of hundreds of small model constructions on the request path).

:meth:`TraceRecorder.plain` gives those values unvalidated, in the trace's field order. The
gateway hands them to a store that validates what it stores (the ingest pipeline: see
:mod:`ingest.codec.unchecked`), so on its request path no trace model is built at all; on a
machine where the gateway's one thread is its limit, that was about 90 µs of it per request.

For hooks that take a validated trace, most of the validation does not need the answer: the
decision's candidates and steps are known once the router has decided. :meth:`TraceRecorder.prebuild`
validates them early; the gateway runs it while the instance works on the request (scheduled just
before it waits for the answer), so :meth:`TraceRecorder.finish`, between the answer's arrival and
its relay, validates only the rest.

Fallback, as the trace records it (``fallback_triggered``, ``fallback_reason``): the decision's own
(nothing feasible, a degraded mode), or an attempt sent after the one before it *failed*: an error,
a timeout, a retryable status. An attempt a hedge race ended (error class ``hedged_out``: the other
one answered first) did not fail, and an attempt that ends in that state was not sent to replace a
failed one, so a hedge race is not a fallback whichever attempt won; a twin that served after the
first attempt really failed (a 503, say, while the twin was out) is one. The reason names the
first failed attempt and its error class. A trace marks a hedge through its attempts alone (one of
them ``hedged_out``); it has no field of its own for it. A stored trace's flag is an outcome, not
part of the decision: replay (:mod:`router_core.decide.verify`) does not compare it.

An instance the forwarder passed over without sending to it (its breaker refused it after the
decision) is a fallback step ``skip/<instance>`` naming the breaker's scope, name and state, with
the instance in ``rejected``; a half-open instance's trial sent ahead of the first-ranked one is a
fallback step ``trial/<instance>``. Each is placed among the attempt steps where it happened. Either
one that moves the request off the decision's first choice is a fallback, with that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter, ValidationError

from router_core.decide.decision import Decision, Steps
from router_core.resilience.fallbacks import Passed
from router_core.rules.route import RouteChoice
from schemas.common import AttemptStatus, RoutingMode, StepKind
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt, CandidateEval, DecisionStep, DecisionTrace, Outcome, RequestFeatures, ShadowDecision

__all__ = ["TraceRecorder"]

# router_core.gateway.hedge.HEDGED_OUT (not imported: the gateway builds on this package, not the reverse).
_HEDGED_OUT = "hedged_out"

_CANDIDATES = TypeAdapter(tuple[CandidateEval, ...])
_STEPS = TypeAdapter(list[DecisionStep])
# DecisionTrace's fields in order, and the defaults of those the recorder does not set (plain()).
_FIELDS = tuple(DecisionTrace.model_fields)
_DEFAULTS = {name: f.get_default(call_default_factory=True) for name, f in DecisionTrace.model_fields.items()
             if not f.is_required()}
# Every field in order at its default (None for a required one, which plain() always sets): plain() copies it
# and overwrites what it knows, in C, instead of a comprehension over thirty-odd fields per request.
_TEMPLATE = {name: _DEFAULTS.get(name) for name in _FIELDS}


class TraceRecorder:
    """Record of one request, written through :meth:`record_decision` and :meth:`record_attempts`."""

    def __init__(self, *, request_id: str, ts: datetime, router_version: str, policy_hash: str, query_hash: str,
                 features: RequestFeatures, intent: str | None = None, intent_confidence: float | None = None,
                 experiment_arm: str | None = None, arm_forced: bool = False,
                 otel: tuple[str, str, str | None, str, str | None] | None = None) -> None:
        self.request_id = request_id
        self.ts = ts
        self.features = features
        self.intent = intent
        self._head: dict[str, Any] = {
            "request_id": request_id, "ts": ts, "router_version": router_version, "policy_hash": policy_hash,
            "query_hash": query_hash, "features": features, "intent": intent, "intent_confidence": intent_confidence,
            "experiment_arm": experiment_arm, "arm_forced": arm_forced,
        }
        if otel is not None:  # (trace id, request span id, the client's span id or None, flags, tracestate or None)
            h = self._head
            h["otel_trace_id"], h["otel_span_id"], h["otel_parent_span_id"], h["otel_trace_flags"], state = otel
            if state:
                h["otel_trace_state"] = state
        self._decision: Decision | None = None
        self._candidates: tuple[CandidateEval, ...] | None = None  # the decision's, once prebuilt
        self._steps = Steps()
        self._built_steps: list[DecisionStep] = []  # steps[:n] as models (prebuild)
        self._attempts: tuple[Attempt, ...] = ()
        self._fallback_reason: str | None = None
        self._mode: RoutingMode | None = None  # set when the answer came from a degraded mode after deciding
        self._shadow: ShadowDecision | None = None  # a shadow policy's decision on the same request
        self._shadow_job: Callable[[], ShadowDecision | None] | None = None  # a shadow decision still to make
        self._route: RouteChoice | None = None  # the routing rule that matched (None: no policy file)
        self._policy_extra: dict[str, Any] = {}  # intent, keywords, attachments for the policy step
        self._degraded_used: str | None = None  # the non-LLM target that answered, if one did
        self._answered: tuple[str, str] | None = None  # (model, instance) whose answer the client got

    @property
    def route(self) -> RouteChoice | None:
        """The routing rule that matched, as the throttle left it (None: no policy file)."""
        return self._route

    def record_policy(self, route: RouteChoice | None, extra: dict[str, Any] | None = None) -> None:
        """Take what the policy made of the request: the rule matched, and the policy step's extras."""
        self._route = route
        if extra is not None:
            self._policy_extra = extra

    def defer_shadow(self, job: Callable[[], ShadowDecision | None] | None) -> None:
        """Keep the shadow policy's decision to make once the answer has left (None: not sampled)."""
        self._shadow_job = job

    @property
    def has_deferred_shadow(self) -> bool:
        """Whether a shadow decision waits to be made (:meth:`run_shadow`)."""
        return self._shadow_job is not None

    def run_shadow(self) -> None:
        """Make the deferred shadow decision and record it (once; an exception is the caller's to log)."""
        job, self._shadow_job = self._shadow_job, None
        if job is not None:
            self._shadow = job()

    def record_degraded(self, target: str | None) -> None:
        """The non-LLM target (a responder, a rule chain's end) that answered, by name (None: none did)."""
        self._degraded_used = target

    def record_decision(self, decision: Decision) -> None:
        """Take the router's decision (once per request)."""
        self._decision = decision
        self._candidates = None
        self._steps.extend(decision.steps)
        self._fallback_reason = decision.fallback_reason

    def prebuild(self) -> None:
        """Validate the decision's candidates and the steps so far now, ahead of :meth:`finish`.

        Optional, and the trace is the same either way. A value that does not validate is left
        as it is, for :meth:`finish` to report.
        """
        try:
            if self._decision is not None and self._candidates is None:
                self._candidates = _CANDIDATES.validate_python(self._decision.candidates)
            if len(self._steps) > len(self._built_steps):
                self._built_steps += _STEPS.validate_python(self._steps[len(self._built_steps):])
        except ValidationError:
            pass

    def mark_degraded(self, reason: str) -> None:
        """A rule chain's non-LLM target answered: the trace's mode is ``rules``, with the reason."""
        self._mode = RoutingMode.RULES
        if self._fallback_reason is None:
            self._fallback_reason = reason
        self._steps.add("fallback", StepKind.FALLBACK, reason=reason)

    def record_attempts(self, attempts: Sequence[Attempt], passed: Sequence[Passed] = (),
                        answered: InstanceSpec | None = None) -> None:
        """Take the forwarding attempts in order; each sent after a failed one is a fallback.

        A hedge race's attempts are not: the one it ended (``hedged_out``) did not fail and was
        not replaced (see the module docstring). ``passed``: the instances the forwarder passed
        over (refused by a breaker) or put first (a half-open trial), each recorded as a step among
        the attempts'. ``answered``: the instance whose answer the client got (None: none did).
        """
        self._attempts = tuple(attempts)
        self._answered = None if answered is None else (answered.model, answered.id)
        for i, (prev, attempt) in enumerate(zip((None, *attempts), attempts, strict=False)):
            self._passed(p for p in passed if p.before == i)
            if prev is not None and _failed(prev) and attempt.error_class != _HEDGED_OUT:
                if self._fallback_reason is None:
                    self._fallback_reason = f"attempt on {prev.instance} failed: {_error_of(prev)}"
                self._steps.add("fallback", StepKind.FALLBACK, reason=f"retrying on {attempt.instance}",
                                instances=[attempt.instance])
            ok = attempt.status is AttemptStatus.OK
            self._steps.add(f"attempt/{attempt.instance}", StepKind.ATTEMPT,
                            value=float(attempt.http_status) if attempt.http_status else None,
                            reason="ok" if ok else attempt.error_class or "", instances=[attempt.instance])
        self._passed(p for p in passed if p.before >= len(attempts))

    def _passed(self, passed: Iterable[Passed]) -> None:
        """Steps for instances passed over or put first; one moving the request off the first choice is a fallback."""
        first = self._decision.selected.id if self._decision is not None and self._decision.selected else None
        for p in passed:
            b = f"{p.scope} breaker {p.breaker} {p.state}"
            if p.refused:
                why = f"{p.instance} not sent: refused by its {b}"
                self._steps.add(f"skip/{p.instance}", StepKind.FALLBACK, reason=why, rejected=[p.instance])
            else:
                why = f"{p.instance} sent first ahead of {p.ahead_of}: a trial of its {b}"
                self._steps.add(f"trial/{p.instance}", StepKind.FALLBACK, reason=why, instances=[p.instance])
            off = p.instance if p.refused else p.ahead_of  # the instance the request was moved off
            if self._fallback_reason is None and first is not None and off == first:
                self._fallback_reason = why

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """The attempts recorded so far."""
        return self._attempts

    @property
    def answered(self) -> tuple[str, str] | None:
        """``(model, instance)`` whose answer the client got (None: no instance answered, or nothing was sent)."""
        return self._answered

    @property
    def selected(self) -> tuple[str, str] | None:
        """``(model, instance)`` that served the request, else the decision's first choice, else None."""
        for attempt in self._attempts:
            if attempt.status is AttemptStatus.OK:
                return attempt.model, attempt.instance
        first = self._decision.selected if self._decision is not None else None
        return None if first is None else (first.model, first.id)

    def finish(self, outcome: Outcome) -> DecisionTrace:
        """Validate and return the trace; called exactly once per request, success or failure."""
        values = self.plain(outcome)
        if self._candidates is not None:
            values["candidates"] = self._candidates
        if self._built_steps:
            values["decision_trace"] = [*self._built_steps, *self._steps[len(self._built_steps):]]
        return DecisionTrace.model_validate(values)

    def plain(self, outcome: Outcome) -> dict[str, Any]:
        """The trace as plain values, unvalidated: every ``DecisionTrace`` field, in its order.

        What :meth:`finish` validates. The gateway hands this to storage as it is
        (:meth:`ingest.codec.encoder.Encoder.plain_trace` gives the bytes the validated trace
        would give); the store validates it there and quarantines it if it is not a valid trace.
        Called once per request, instead of :meth:`finish`.
        """
        model, instance = self.selected or (None, None)
        d = self._decision
        values = {
            **self._head, "rule": d.rule if d else self._rule_before_decision(),
            "score_weights": d.weights if d else (),
            "candidates": d.candidates if d else (), "decision_trace": self._steps, "selected_model": model,
            "selected_instance": instance, "fallback_triggered": self._fallback_reason is not None,
            "fallback_reason": self._fallback_reason, "attempts": self._attempts,
            "mode": self._mode or (d.mode if d else RoutingMode.NORMAL), "latency_ms": d.decision_ms if d else 0.0,
            "selection_probability": self._propensity(instance), "shadow": self._shadow, "outcome": outcome,
            "inputs": d.inputs if d else None,
            "policy": None if self._route is None else self._route.step(self._attempts, self._degraded_used,
                                                                       self._policy_extra),
        }
        out = _TEMPLATE.copy()  # the fields' order; assigning an existing key keeps its place
        out.update(values)
        return out

    def _rule_before_decision(self) -> str | None:
        """The policy rule that matched a request refused before any decision (throttled): the trace's ``rule``."""
        rule = None if self._route is None else self._route.rule
        return None if rule is None else rule.name

    def _propensity(self, served: str | None) -> float | None:
        """The picker's chance for the instance that served; None when a retry served another one."""
        d = self._decision
        if d is None or d.selected is None or served != d.selected.id:
            return None
        return d.selection_probability


def _failed(attempt: Attempt) -> bool:
    """Whether ``attempt`` failed: not ok, and not ended by a hedge race (its twin answered first)."""
    return attempt.status is not AttemptStatus.OK and attempt.error_class != _HEDGED_OUT


def _error_of(attempt: Attempt) -> str:
    """A failed attempt's error class; for a record without one (intake), its HTTP status or its status."""
    if attempt.error_class:
        return attempt.error_class
    return f"HTTP {attempt.http_status}" if attempt.http_status else attempt.status.value
