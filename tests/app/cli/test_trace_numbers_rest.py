"""``routelens trace --candidates N``: the one line counting the candidates not shown says what the shown ones say.

Found by checking the tree against the stored decisions of a real gateway (session 19): a rule's
chain (shown as "not filtered or scored") was counted as feasible once out of sight; a candidate
with a soft verdict before the hard one was counted as rejected by the soft constraint; an attempt
answered with HTTP 500 read "HTTP 500 HTTP 500".
"""

from __future__ import annotations

import io
from datetime import timedelta

from rich.console import Console

from app.cli.trace_tree import render_trace
from bench.replay_traces import T0, fleet_config
from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import DecisionContext
from router_core.decide.policy import build_policy
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.state.quality import QualityTable
from schemas import Attempt, AttemptStatus, DecisionTrace, Outcome, OutcomeStatus
from schemas.fleet import InstanceSnapshot
from schemas.trace import RequestFeatures
from tests.app.ui.data import audit_cases as cases

CHAIN_ONLY = "not filtered or scored (rule's chain)"


def as_text(trace: DecisionTrace, candidates: int | None) -> str:
    console = Console(width=240, record=True, color_system=None, file=io.StringIO())
    console.print(render_trace(trace, candidates=candidates))
    return console.export_text()


def rest_line(text: str) -> str:
    return next(line for line in text.splitlines() if "more:" in line)


def decided(**gauges: dict[str, float]) -> DecisionTrace:
    """A trace the router decided over 4 instances, ``gauges`` set per instance, the first choice served."""
    policy = build_policy(fleet_config(4), builtin_registry())
    state = {s.id: InstanceSnapshot(instance=s.id, model=s.model, scraped_at=T0, engine="vllm", queue=1.0,
                                    running=0.0, kv_cache_usage=0.1, warmup_progress=1.0, error_rate=0.0)
             for s in policy.fleet}
    for iid, values in gauges.items():
        state[iid] = state[iid].model_copy(update=values)
    features = RequestFeatures(requested_model="auto", n_messages=1, input_chars=40, est_input_tokens=10,
                               analysed_chars=40)
    ts = T0 + timedelta(milliseconds=100)
    ctx = DecisionContext(request_id="req-rest", features=features, intent="chat", now=ts,
                          quality=QualityTable(policy.models).snapshot())
    decision = Router(policy).decide(ctx, state)
    rec = TraceRecorder(request_id="req-rest", ts=ts, router_version="t", policy_hash=policy.hash,
                        query_hash="sha256:" + "0" * 64, features=features, intent="chat")
    rec.record_decision(decision)
    first = decision.selected
    assert first is not None
    rec.record_attempts([Attempt(seq=0, instance=first.id, model=first.model, status=AttemptStatus.OK,
                                 http_status=200, latency_ms=5.0)])
    return rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=6.0))


def test_a_rules_chain_out_of_sight_is_counted_as_the_chain_not_as_feasible() -> None:
    trace = cases.rule_with_chain()  # v4-a and v4-b scored; coder-a and coder-b the chain's, never judged
    shown = as_text(trace, candidates=2)
    assert CHAIN_ONLY not in shown.split("more:")[0]  # neither chain candidate is shown in full
    assert rest_line(shown).split("more: ")[1].startswith(f"2 {CHAIN_ONLY}")
    one = as_text(trace, candidates=1)  # v4-a in full (the best, tried and served); v4-b out of sight
    assert rest_line(one).split("more: ")[1].startswith(f"1 feasible; 2 {CHAIN_ONLY}")


def test_a_rejected_candidate_is_counted_under_the_constraint_that_removed_it() -> None:
    # inst-0: KV 0.8 is past the kv-cache constraint's soft threshold (0.75: a soft verdict, a lower
    # score) and its queue of 12 past the queue constraint's 10 (the hard verdict that removed it)
    trace = decided(**{"inst-0": {"kv_cache_usage": 0.8, "queue": 12.0}})
    removed = next(c for c in trace.candidates if c.instance == "inst-0")
    assert not removed.feasible and [(v.constraint, v.severity) for v in removed.violations] == [
        ("kv-cache", "soft"), ("queue", "hard")]
    line = rest_line(as_text(trace, candidates=1))
    assert line.split("more: ")[1].startswith("2 feasible; 1 rejected (queue 1)"), line


def test_an_answer_with_an_http_error_says_its_status_once() -> None:
    trace = cases.trial_failed()
    failed = Attempt(seq=0, instance="big-a", model="big", status=AttemptStatus.HTTP_ERROR, http_status=500,
                     error_class="HTTP 500", latency_ms=1.2)  # as the forwarder records an upstream 500
    timeout = Attempt(seq=1, instance="big-b", model="big", status=AttemptStatus.TIMEOUT, error_class="timeout",
                      latency_ms=1.3)
    text = as_text(trace.model_copy(update={"attempts": [failed, timeout]}), candidates=None)
    lines = [line for line in text.splitlines() if "#0 big-a" in line or "#1 big-b" in line]
    assert len(lines) == 2 and lines[0].count("HTTP 500") == 1, lines
    assert "timeout" in lines[1].split("(big)")[1]  # an error class that is not the status is still said
