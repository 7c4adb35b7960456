"""TraceRecorder: the decision's steps, then a step per attempt (a fallback step per retry, none per hedge), one seq."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from router_core.decide.decision import Decision, Steps
from router_core.decide.recorder import TraceRecorder
from schemas import AttemptStatus, Outcome, OutcomeStatus, RoutingMode, StepKind
from schemas.fleet import InstanceSpec
from schemas.trace import Attempt, DecisionTrace
from tests.router_core.conftest import NOW, features

SPECS = {iid: InstanceSpec(id=iid, model=model, url="http://127.0.0.1:1")
         for iid, model in [("a", "big"), ("b", "small"), ("c", "big")]}
OUTCOME = Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=3.0)
EMPTY = "no feasible instance; failing open over all candidates"
REJECT = "no feasible instance; rejecting (on_empty: reject)"


def decision(targets: tuple[str, ...], fallback_reason: str | None = None,
             mode: RoutingMode = RoutingMode.NORMAL) -> Decision:
    steps = Steps()
    steps.add("analyse", StepKind.ANALYSE, value=100.0)
    steps.add("policy", StepKind.POLICY, reason="rule auto", instances=list(SPECS))
    if targets:
        steps.add("pick", StepKind.PICK, value=0.9, plugin="max/max-score-picker", instances=[targets[0]])
    return Decision(rule="auto", targets=tuple(SPECS[t] for t in targets), candidates=(), weights=(),
                    steps=tuple(steps), fallback_reason=fallback_reason, mode=mode, decision_ms=0.25)


def attempt(seq: int, iid: str, status: AttemptStatus, http: int | None = None, error: str | None = None) -> Attempt:
    return Attempt(seq=seq, instance=iid, model=SPECS[iid].model, status=status, http_status=http, error_class=error,
                   latency_ms=1.0)


def recorder() -> TraceRecorder:
    return TraceRecorder(request_id="r1", ts=NOW, router_version="t", policy_hash="sha256:x",
                         query_hash="sha256:" + "0" * 64, features=features())


OK, HTTP, TIMEOUT, CONNECT = AttemptStatus.OK, AttemptStatus.HTTP_ERROR, AttemptStatus.TIMEOUT, \
    AttemptStatus.CONNECT_ERROR


@dataclass(frozen=True)
class Case:
    id: str
    targets: tuple[str, ...]
    attempts: list[Attempt]
    steps: list[tuple[str, StepKind, float | None, str, list[str]]]  # after the decision's steps
    fallback_reason: str | None
    selected: tuple[str, str] | None
    decision_fallback: str | None = None
    mode: RoutingMode = RoutingMode.NORMAL


CASES = [
    Case("first-attempt-ok", ("a", "b"), [attempt(0, "a", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, 200.0, "ok", ["a"])], None, ("big", "a")),
    Case("retry-then-ok", ("a", "b"), [attempt(0, "a", HTTP, 503, "HTTP 503"), attempt(1, "b", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, 503.0, "HTTP 503", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 200.0, "ok", ["b"])], "attempt on a failed: HTTP 503", ("small", "b")),
    Case("all-failed", ("a", "b"), [attempt(0, "a", TIMEOUT, None, "timeout"),
                                    attempt(1, "b", CONNECT, None, "ClientConnectorError")],
         [("attempt/a", StepKind.ATTEMPT, None, "timeout", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, None, "ClientConnectorError", ["b"])],
         "attempt on a failed: timeout", ("big", "a")),
    Case("first-reason-kept", ("a", "b", "c"), [attempt(0, "a", HTTP, 502, "HTTP 502"),
                                                attempt(1, "b", HTTP, 500, "HTTP 500"), attempt(2, "c", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, 502.0, "HTTP 502", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 500.0, "HTTP 500", ["b"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on c", ["c"]),
          ("attempt/c", StepKind.ATTEMPT, 200.0, "ok", ["c"])], "attempt on a failed: HTTP 502", ("big", "c")),
    Case("decision-fallback-kept", ("b", "a"), [attempt(0, "b", HTTP, 503, "HTTP 503"), attempt(1, "a", OK, 200)],
         [("attempt/b", StepKind.ATTEMPT, 503.0, "HTTP 503", ["b"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on a", ["a"]),
          ("attempt/a", StepKind.ATTEMPT, 200.0, "ok", ["a"])], EMPTY, ("big", "a"),
         decision_fallback=EMPTY, mode=RoutingMode.FAIL_OPEN),
    # Hedging (router_core/gateway/hedge.py): the attempt a race ended is hedged_out; no race is a fallback.
    Case("hedge-first-won", ("a", "b"), [attempt(0, "a", OK, 200), attempt(1, "b", TIMEOUT, None, "hedged_out")],
         [("attempt/a", StepKind.ATTEMPT, 200.0, "ok", ["a"]),
          ("attempt/b", StepKind.ATTEMPT, None, "hedged_out", ["b"])], None, ("big", "a")),
    Case("hedge-twin-won", ("a", "b"), [attempt(0, "a", TIMEOUT, None, "hedged_out"), attempt(1, "b", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, None, "hedged_out", ["a"]),
          ("attempt/b", StepKind.ATTEMPT, 200.0, "ok", ["b"])], None, ("small", "b")),
    Case("hedge-twin-failed-first-won", ("a", "b"), [attempt(0, "a", OK, 200), attempt(1, "b", HTTP, 503, "HTTP 503")],
         [("attempt/a", StepKind.ATTEMPT, 200.0, "ok", ["a"]),
          ("attempt/b", StepKind.ATTEMPT, 503.0, "HTTP 503", ["b"])], None, ("big", "a")),
    Case("hedge-answered-error-twin-hedged-out", ("a", "b"),
         [attempt(0, "a", HTTP, 400, "HTTP 400"), attempt(1, "b", TIMEOUT, None, "hedged_out")],
         [("attempt/a", StepKind.ATTEMPT, 400.0, "HTTP 400", ["a"]),
          ("attempt/b", StepKind.ATTEMPT, None, "hedged_out", ["b"])], None, ("big", "a")),
    Case("first-failed-during-race-twin-served", ("a", "b"), [attempt(0, "a", HTTP, 503, "HTTP 503"),
                                                               attempt(1, "b", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, 503.0, "HTTP 503", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 200.0, "ok", ["b"])], "attempt on a failed: HTTP 503", ("small", "b")),
    Case("race-both-failed-then-retry", ("a", "b", "c"),
         [attempt(0, "a", TIMEOUT, None, "timeout"), attempt(1, "b", HTTP, 503, "HTTP 503"), attempt(2, "c", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, None, "timeout", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 503.0, "HTTP 503", ["b"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on c", ["c"]),
          ("attempt/c", StepKind.ATTEMPT, 200.0, "ok", ["c"])], "attempt on a failed: timeout", ("big", "c")),
    # A failed record without an error class (an imported trace): the reason names its status, never "None".
    Case("failed-without-error-class", ("a", "b"), [attempt(0, "a", HTTP, 503), attempt(1, "b", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, 503.0, "", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 200.0, "ok", ["b"])], "attempt on a failed: HTTP 503", ("small", "b")),
    Case("timed-out-without-error-class", ("a", "b"), [attempt(0, "a", TIMEOUT), attempt(1, "b", OK, 200)],
         [("attempt/a", StepKind.ATTEMPT, None, "", ["a"]),
          ("fallback", StepKind.FALLBACK, None, "retrying on b", ["b"]),
          ("attempt/b", StepKind.ATTEMPT, 200.0, "ok", ["b"])], "attempt on a failed: timeout", ("small", "b")),
    Case("client-error-passed-through", ("a",), [attempt(0, "a", OK, 400)],
         [("attempt/a", StepKind.ATTEMPT, 400.0, "ok", ["a"])], None, ("big", "a")),
    Case("not-forwarded", ("a", "b"), [], [], None, ("big", "a")),
    Case("nothing-to-try", (), [], [], REJECT, None, decision_fallback=REJECT, mode=RoutingMode.SAFE),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_record_decision_and_attempts(case: Case) -> None:
    rec = recorder()
    d = decision(case.targets, case.decision_fallback, case.mode)
    rec.record_decision(d)
    rec.record_attempts(case.attempts)
    assert rec.selected == case.selected and rec.attempts == tuple(case.attempts)
    trace = rec.finish(OUTCOME)
    steps = trace.decision_trace
    assert [s.seq for s in steps] == list(range(len(steps)))
    assert [s.model_dump() for s in steps[:len(d.steps)]] == [dict(s) for s in d.steps]
    assert [(s.step, s.kind, s.value, s.reason, s.instances) for s in steps[len(d.steps):]] == case.steps
    assert (trace.fallback_reason, trace.fallback_triggered) == (case.fallback_reason, case.fallback_reason is not None)
    assert (trace.selected_model, trace.selected_instance) == (case.selected or (None, None))
    assert (trace.rule, trace.mode, trace.latency_ms, trace.attempts) == ("auto", case.mode, 0.25, case.attempts)


def test_the_audited_hedge_is_not_a_fallback() -> None:
    """The audit's trace: #0 on coder-6b-b answered 200, #1 on coder-6b-a was its twin, hedged out.

    It was recorded ``fallback: true`` with "attempt on coder-6b-b failed: None".
    """
    rec = recorder()
    rec.record_attempts([
        Attempt(seq=0, instance="coder-6b-b", model="coder-6b", status=OK, http_status=200, latency_ms=900.0),
        Attempt(seq=1, instance="coder-6b-a", model="coder-6b", status=TIMEOUT, error_class="hedged_out",
                latency_ms=400.0),
    ])
    trace = rec.finish(OUTCOME)
    assert (trace.fallback_triggered, trace.fallback_reason) == (False, None)
    assert trace.selected_instance == "coder-6b-b"
    assert [s.kind for s in trace.decision_trace] == [StepKind.ATTEMPT, StepKind.ATTEMPT]


def test_the_recorders_hedged_out_is_the_forwarders() -> None:
    from router_core.decide import recorder as module
    from router_core.gateway.hedge import HEDGED_OUT

    assert module._HEDGED_OUT == HEDGED_OUT


def test_a_request_that_never_reached_the_router_is_still_traced() -> None:
    trace = recorder().finish(Outcome(status=OutcomeStatus.ERROR, http_status=404, error_class="model_not_found",
                                      total_ms=1.0))
    assert isinstance(trace, DecisionTrace)
    assert (trace.rule, trace.decision_trace, trace.candidates, trace.selected_instance) == (None, [], [], None)
    assert (trace.mode, trace.latency_ms, trace.fallback_triggered) == (RoutingMode.NORMAL, 0.0, False)
    assert trace.outcome.error_class == "model_not_found"


def _with_candidates(d: Decision, weight_factor: float = 0.5) -> Decision:
    cands = ({"instance": "a", "model": "big", "zone": None, "feasible": True, "violations": [], "state": None,
              "score_terms": [0.5, 1.0], "weight_factor": weight_factor, "total": 0.4, "rank": 1},
             {"instance": "b", "model": "small", "zone": "z1", "feasible": False, "state": None,
              "violations": [{"constraint": "queue", "metric": "queue", "op": "<=", "threshold": 8.0, "value": 9.0,
                              "reason": "queue 9 > 8"}],
              "score_terms": [], "weight_factor": 1.0, "total": None, "rank": None})
    return Decision(rule=d.rule, targets=d.targets, candidates=cands, weights=d.weights, steps=d.steps,
                    fallback_reason=d.fallback_reason, mode=d.mode, decision_ms=d.decision_ms)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("when", ["before-attempts", "after-attempts", "twice"])
def test_prebuilding_gives_the_same_trace(case: Case, when: str) -> None:
    """What the gateway runs while the instance works changes nothing in the trace, whenever it runs."""
    d = _with_candidates(decision(case.targets, case.decision_fallback, case.mode))
    plain, early = recorder(), recorder()
    for rec in (plain, early):
        rec.record_decision(d)
    if when in ("before-attempts", "twice"):
        early.prebuild()
    for rec in (plain, early):
        rec.record_attempts(case.attempts)
    if when in ("after-attempts", "twice"):
        early.prebuild()
    want, got = plain.finish(OUTCOME), early.finish(OUTCOME)
    assert got == want and got.model_dump_json() == want.model_dump_json()
    assert [c.instance for c in got.candidates] == ["a", "b"] and got.candidates[1].violations[0].value == 9.0


def test_prebuilding_leaves_an_invalid_value_for_finish_to_report() -> None:
    rec = recorder()
    rec.record_decision(_with_candidates(decision(("a",)), weight_factor=1.5))  # out of [0, 1]
    rec.prebuild()  # no error here: the request goes on
    with pytest.raises(ValueError, match="weight_factor"):
        rec.finish(OUTCOME)
