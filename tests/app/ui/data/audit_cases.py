"""Traces shaped as the router and gateway record them, for the audit of "Why this model" and ``routelens trace``.

- :func:`breakers_fail_open`: both instances of ``big`` have their breaker open; the router fails
  open and picks big-b, the forwarder's breakers refuse both: no attempt, a 502. With
  ``skips=True`` the trace also holds the steps the gateway now records for the instances it passed
  over (``skip/<instance>``); without, it is an older trace.
- :func:`trial_failed`: the pick is big-b, but big-a's half-open breaker sends its trial first; it
  fails to connect and nothing else is tried: a 502, big-b never contacted.
- :func:`rule_with_chain`: rule ``legal`` targets deepseek-v4-32k (two instances, filtered and
  scored); its chain's coder-6b instances are listed after them, neither filtered nor scored.
- :func:`verdict`: a feedback record saying the routing of a request was wrong.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from schemas import (
    Attempt,
    AttemptStatus,
    CandidateEval,
    DecisionStep,
    DecisionTrace,
    Feedback,
    Outcome,
    OutcomeStatus,
    ScoreWeight,
    StepKind,
    Violation,
)
from schemas.common import RoutingMode
from schemas.trace_policy import ClauseTried, PolicyStep
from tests.factories import make_trace

TS = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WEIGHTS = [ScoreWeight(name="queue", weight=0.5, scorer="queue/queue-depth-scorer"),
           ScoreWeight(name="latency", weight=0.5, scorer="latency/latency-scorer")]
BAD_GATEWAY = Outcome(status=OutcomeStatus.ERROR, http_status=502, error_class="all_attempts_failed", total_ms=2.0)
FILTERS = ("freshness", "kv-cache", "breaker")


def _open(instance: str) -> Violation:
    return Violation(constraint="breaker", metric="breaker_instance", op="closed", value=2.0, threshold=0.0,
                     reason="3 consecutive connect errors")


def _scored(instance: str, model: str, terms: list[float], rank: int | None, *, feasible: bool = True,
            violations: list[Violation] | None = None) -> CandidateEval:
    total = sum(w.weight * t for w, t in zip(WEIGHTS, terms, strict=True))
    return CandidateEval(instance=instance, model=model, feasible=feasible, violations=violations or [],
                         score_terms=terms, total=total, rank=rank)


def _steps(*spec: tuple[str, StepKind, float | None, str, list[str], list[str]]) -> list[DecisionStep]:
    return [DecisionStep(seq=i, step=s, kind=k, value=v, reason=r, instances=kept, rejected=rej)
            for i, (s, k, v, r, kept, rej) in enumerate(spec)]


def _scores() -> list[tuple[str, StepKind, float | None, str, list[str], list[str]]]:
    return [(f"score/{w.name}", StepKind.SCORE, w.weight, f"weight {w.weight:g}", [], []) for w in WEIGHTS]


def breakers_fail_open(*, skips: bool = False) -> DecisionTrace:
    """Both ``big`` instances' breakers open, fail open picks big-b, the breakers refuse both: no attempt, 502."""
    cands = [_scored("big-b", "big", [0.9, 0.8], 1, feasible=False, violations=[_open("big-b")]),
             _scored("big-a", "big", [0.7, 0.6], 2, feasible=False, violations=[_open("big-a")])]
    spec = [("analyse", StepKind.ANALYSE, 40.0, "1 messages, ~40 tokens", [], []),
            ("policy", StepKind.POLICY, None, "rule model:big", ["big-a", "big-b"], []),
            ("filter/breaker", StepKind.FILTER, 0.0, "kept 0, rejected 2", [], ["big-b", "big-a"]),
            ("fallback", StepKind.FALLBACK, None, "no feasible instance; failing open over all candidates",
             ["big-b", "big-a"], []),
            *_scores(),
            ("pick", StepKind.PICK, 0.85, "max score 0.850, margin 0.200", ["big-b"], [])]
    if skips:
        spec += [(f"skip/{i}", StepKind.FALLBACK, None, f"{i} not sent: refused by its instance breaker {i} open",
                  [], [i]) for i in ("big-b", "big-a")]
    trace = make_trace("req-breakers" + ("-skips" if skips else ""), ts=TS, rule="model:big", score_weights=WEIGHTS,
                       candidates=cands, decision_trace=_steps(*spec), selected_model="big",
                       selected_instance="big-b", attempts=[], outcome=BAD_GATEWAY, mode=RoutingMode.FAIL_OPEN,
                       fallback_triggered=True, fallback_reason="no feasible instance; failing open over all "
                                                                "candidates")
    return trace.model_copy(update={"features": trace.features.model_copy(update={"requested_model": "big"})})


def trial_failed() -> DecisionTrace:
    """The pick is big-b; big-a's breaker trial goes first and fails to connect; nothing else is sent: 502."""
    cands = [_scored("big-b", "big", [0.9, 0.8], 1), _scored("big-a", "big", [0.7, 0.6], 2)]
    spec = [("analyse", StepKind.ANALYSE, 40.0, "1 messages, ~40 tokens", [], []),
            ("policy", StepKind.POLICY, None, "rule model:big", ["big-a", "big-b"], []),
            ("filter/breaker", StepKind.FILTER, 2.0, "kept 2, rejected 0", [], []),
            *_scores(),
            ("pick", StepKind.PICK, 0.85, "max score 0.850, margin 0.200", ["big-b"], []),
            ("attempt/big-a", StepKind.ATTEMPT, None, "connect_error", ["big-a"], [])]
    attempt = Attempt(seq=0, instance="big-a", model="big", status=AttemptStatus.CONNECT_ERROR,
                      error_class="ClientConnectorError", latency_ms=1.2)
    return make_trace("req-trial", ts=TS, rule="model:big", score_weights=WEIGHTS, candidates=cands,
                      decision_trace=_steps(*spec), selected_model="big", selected_instance="big-b",
                      attempts=[attempt], outcome=BAD_GATEWAY)


def rule_with_chain() -> DecisionTrace:
    """Rule ``legal``: its target's two instances filtered (kept 2, rejected 0) and scored; its chain's two after."""
    target, chain = "deepseek-v4-32k", "coder-6b"
    cands = [_scored("v4-a", target, [0.9, 0.8], 1), _scored("v4-b", target, [0.6, 0.7], 2),
             CandidateEval(instance="coder-a", model=chain, feasible=True, rank=3),
             CandidateEval(instance="coder-b", model=chain, feasible=True, rank=4)]
    spec = [("analyse", StepKind.ANALYSE, 900.0, "1 messages, ~900 tokens", [], []),
            ("policy", StepKind.POLICY, None, f"rule legal matched after 2 tried; target {target}; chain {chain}",
             [], []),
            *[(f"filter/{f}", StepKind.FILTER, 2.0, "kept 2, rejected 0", [], []) for f in FILTERS],
            *_scores(),
            ("pick", StepKind.PICK, 0.85, "max score 0.850, margin 0.200", ["v4-a"], []),
            ("attempt/v4-a", StepKind.ATTEMPT, 200.0, "ok", ["v4-a"], [])]
    step = PolicyStep(policy="policy.yaml sha256:1", rule="legal", target=target, chain=[chain], chain_used=[target],
                      tried=[ClauseTried(rule="short_chat", matched=False, detail=["input_length = 900 > 200"]),
                             ClauseTried(rule="legal", matched=True, detail=["contains_legal_terms(prompt): true"])])
    attempt = Attempt(seq=0, instance="v4-a", model=target, status=AttemptStatus.OK, http_status=200, latency_ms=80.0)
    return make_trace("req-legal", ts=TS, rule="legal", policy=step, score_weights=WEIGHTS, candidates=cands,
                      decision_trace=_steps(*spec), selected_model=target, selected_instance="v4-a",
                      attempts=[attempt])


def verdict(request_id: str, *, correct: bool = False, expected_model: str | None = "coder-6b") -> Feedback:
    """The feedback an operator (or a client) sent on ``request_id``, five seconds after it."""
    return Feedback(request_id=request_id, ts=TS + timedelta(seconds=5), correct=correct,
                    expected_model=expected_model, source="app")
