"""Traces for the "why" tests: a normal win, a tie-break, no feasible instance, an unknown model."""

from __future__ import annotations

from datetime import UTC, datetime

from schemas import Attempt, AttemptStatus, CandidateEval, DecisionTrace, Outcome, OutcomeStatus, ScoreWeight, Violation
from schemas.common import RoutingMode
from tests.factories import make_trace

SINCE = datetime(2026, 11, 1, 10, 2, 3, tzinfo=UTC)
WEIGHTS = [ScoreWeight(name="queue", weight=0.5, scorer="q/queue-depth-scorer"),
           ScoreWeight(name="latency", weight=0.5, scorer="l/latency-scorer")]
# The attempt that answered: coder-6b-b, the instance each of these decisions selected.
SERVED = [Attempt(seq=0, instance="coder-6b-b", model="coder-6b", status=AttemptStatus.OK, http_status=200,
                  latency_ms=40.0)]
KV = Violation(constraint="kv-cache", metric="kv_cache_usage", op="<=", value=0.91, threshold=0.85,
               reason="kv_cache_usage 0.91 broke <= 0.85; latched out until 0.8 holds for 10s", since=SINCE)


def cand(instance: str, terms: list[float] | None, rank: int | None, factor: float = 1.0) -> CandidateEval:
    if terms is None:
        return CandidateEval(instance=instance, model="v4-32k", feasible=False, violations=[KV])
    total = factor * sum(w.weight * t for w, t in zip(WEIGHTS, terms, strict=True))
    return CandidateEval(instance=instance, model="coder-6b", feasible=True, score_terms=terms,
                         weight_factor=factor, total=total, rank=rank)


def normal_win() -> DecisionTrace:
    """coder-6b-b beats coder-6b-a by 0.04, all on latency; v4-32k-a is latched out on KV cache."""
    cands = [cand("coder-6b-a", [0.5, 0.5], 2), cand("coder-6b-b", [0.5, 0.58], 1), cand("v4-32k-a", None, None)]
    return make_trace("req-win", score_weights=WEIGHTS, candidates=cands, decision_trace=[],
                      selected_model="coder-6b", selected_instance="coder-6b-b", attempts=SERVED)


def tie_break() -> DecisionTrace:
    cands = [cand("coder-6b-a", [0.6, 0.4], 2), cand("coder-6b-b", [0.4, 0.6], 1)]
    return make_trace("req-tie", score_weights=WEIGHTS, candidates=cands, decision_trace=[],
                      selected_model="coder-6b", selected_instance="coder-6b-b", attempts=SERVED)


def no_feasible() -> DecisionTrace:
    out = Outcome(status=OutcomeStatus.ERROR, http_status=503, error_class="no_feasible_instance", total_ms=1.0)
    return make_trace("req-none", score_weights=WEIGHTS, candidates=[cand("v4-32k-a", None, None)],
                      decision_trace=[], selected_model=None, selected_instance=None, attempts=[], outcome=out)


def fail_open() -> DecisionTrace:
    return no_feasible().model_copy(update={"selected_instance": "v4-32k-a", "mode": RoutingMode.FAIL_OPEN})


def unknown_model() -> DecisionTrace:
    out = Outcome(status=OutcomeStatus.ERROR, http_status=404, error_class="model_not_found", total_ms=0.5)
    trace = make_trace("req-unknown", score_weights=[], candidates=[], decision_trace=[], selected_model=None,
                       selected_instance=None, attempts=[], outcome=out)
    feats = trace.features.model_copy(update={"requested_model": "gpt-9"})
    return trace.model_copy(update={"features": feats})
