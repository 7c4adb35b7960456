"""The Router and the recorder say only what happened: fail-open keeps the context window, one candidate is no tie,
instances the forwarder passed over are steps among the attempts."""

from __future__ import annotations

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import CONTEXT_LENGTH_EXCEEDED
from router_core.resilience.fallbacks import Passed
from router_core.state.quality import QualityTable
from schemas import Attempt, AttemptStatus, Outcome, OutcomeStatus, RoutingMode, StepKind
from tests.router_core.conftest import NOW, decide, features, healthy, make_config, snap

HOT = {k: snap(k, kv=0.99) for k in healthy()}  # every instance over the KV-cache constraint: nothing feasible


def test_failing_open_ranks_only_the_candidates_whose_window_holds_the_request() -> None:
    ranked, trace = decide(HOT, feats=features(tokens=8000, max_tokens=1000))  # 9,000 > small-a's 8,192
    assert trace.mode is RoutingMode.FAIL_OPEN and sorted(ranked) == ["big-a", "big-b"]
    small = next(c for c in trace.candidates if c.instance == "small-a")
    assert small.rank is None and small.total is None
    assert [v.constraint for v in small.violations if v.severity == "hard"][-1] == "context-window"
    step = next(s for s in trace.decision_trace if s.kind is StepKind.FALLBACK)
    assert sorted(step.instances) == ["big-a", "big-b"] and step.rejected == ["small-a"]
    assert trace.fallback_reason == ("no feasible instance; failing open over the candidates whose context window "
                                     "holds ~9000 tokens")


def test_failing_open_over_candidates_that_all_fit_reads_as_before() -> None:
    ranked, trace = decide(HOT)
    assert len(ranked) == 3 and trace.fallback_reason == "no feasible instance; failing open over all candidates"


def test_failing_open_with_no_window_that_holds_the_request_sends_nothing() -> None:
    cfg = make_config()
    router = build_router(cfg)
    feats = features(model="small", tokens=9000)
    ctx = DecisionContext(request_id="r1", features=feats, intent="chat", now=NOW,
                          quality=QualityTable(cfg.models).snapshot())
    decision = router.decide(ctx, HOT)
    assert decision.targets == () and decision.no_feasible == CONTEXT_LENGTH_EXCEEDED
    assert decision.mode is RoutingMode.SAFE
    assert decision.fallback_reason == ("no feasible instance, and no candidate's context window holds the request "
                                        "(~9000 tokens, the largest is 8192): not failing open")


def test_a_single_feasible_candidate_is_no_tie() -> None:
    state = healthy() | {"big-a": snap("big-a", age=None), "big-b": snap("big-b", age=None)}  # never scraped
    ranked, trace = decide(state)
    assert ranked == ["small-a"]
    pick = next(s for s in trace.decision_trace if s.step == "pick")
    assert pick.reason.endswith("; the only feasible candidate") and "margin" not in pick.reason
    assert "ties by" not in pick.reason


def _recorder() -> TraceRecorder:
    cfg = make_config()
    router = build_router(cfg)
    feats = features()
    ctx = DecisionContext(request_id="r1", features=feats, intent="chat", now=NOW,
                          quality=QualityTable(cfg.models).snapshot())
    rec = TraceRecorder(request_id="r1", ts=NOW, router_version="t", policy_hash=router.policy.hash,
                        query_hash="sha256:" + "0" * 64, features=feats)
    rec.record_decision(router.decide(ctx, healthy()))  # big-b first, then big-a, small-a
    return rec


def _attempt(seq: int, iid: str, status: AttemptStatus, http: int | None) -> Attempt:
    return Attempt(seq=seq, instance=iid, model=iid.split("-")[0], status=status, http_status=http,
                   error_class=f"HTTP {http}", latency_ms=1.0)


def test_passed_over_instances_are_steps_among_the_attempts_and_a_refused_pick_is_a_fallback() -> None:
    rec = _recorder()
    passed = [Passed("big-b", "big", "instance", "big-b", "open", 0),
              Passed("small-a", "small", "model", "small", "half-open, trial slots taken", 1)]
    rec.record_attempts([_attempt(0, "big-a", AttemptStatus.HTTP_ERROR, 503)], passed)
    trace = rec.finish(Outcome(status=OutcomeStatus.ERROR, http_status=502, total_ms=1.0))
    tail = [(s.step, s.reason, s.rejected) for s in trace.decision_trace if s.step.split("/")[0] in ("skip", "attempt")]
    assert tail == [
        ("skip/big-b", "big-b not sent: refused by its instance breaker big-b open", ["big-b"]),
        ("attempt/big-a", "HTTP 503", []),
        ("skip/small-a", "small-a not sent: refused by its model breaker small half-open, trial slots taken",
         ["small-a"]),
    ]
    assert trace.fallback_triggered and trace.fallback_reason == tail[0][1]
    assert rec.answered is None and trace.selected_instance == "big-b"  # nothing answered: the pick stays


def test_the_instance_that_answered_is_the_one_the_recorder_names() -> None:
    rec = _recorder()
    assert rec.answered is None
    spec = make_config().fleet.instances[1]  # big-b
    rec.record_attempts([_attempt(0, "big-b", AttemptStatus.HTTP_ERROR, 400)], answered=spec)
    assert rec.answered == ("big", "big-b")
