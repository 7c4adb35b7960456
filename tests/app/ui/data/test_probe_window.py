"""Probes linked to traffic: bad windows, verdicts at a moment, where a request goes without its instance."""

from __future__ import annotations

from datetime import timedelta

from app.experiments.verify import PolicyShelf
from app.ui.data.probe_window import bad_windows, verdicts_at, window_at, without
from router_core.decide.decision import DecisionContext
from router_core.decide.policy_doc import canonical, document_hash, policy_document
from router_core.state.quality import QualityTable
from schemas.common import ProbeKind, ProbeVerdict
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.trace_inputs import BlockedInstance, DecisionInputs
from tests.router_core.conftest import NOW, features, healthy, make_config
from tests.router_core.decide.test_exact_replay import live

OK, DEG, FAIL = ProbeVerdict.OK, ProbeVerdict.DEGRADED, ProbeVerdict.FAILED


def _r(s: int, kind: ProbeKind, verdict: ProbeVerdict, instance: str = "a", reason: str = "") -> ProbeResult:
    return ProbeResult(probe_id=f"{instance}-{kind.value}-{s}", ts=NOW + timedelta(seconds=s), instance=instance,
                       model="m", kind=kind, verdict=verdict, reason=reason)


SEM, LAT = ProbeKind.SEMANTIC, ProbeKind.LATENCY


def test_a_window_lasts_until_every_kind_that_went_bad_passes_again() -> None:
    results = [_r(0, SEM, OK), _r(30, SEM, DEG, reason="cosine 0.71 < 0.8"), _r(45, LAT, FAIL, reason="p95 3x"),
               _r(60, SEM, OK), _r(75, LAT, DEG), _r(90, LAT, OK), _r(120, SEM, FAIL, reason="garbled"),
               _r(100, SEM, FAIL, instance="b")]  # another instance's result is not a's
    first, second = bad_windows(list(reversed(results)), "a")  # any order in
    assert (first.start, first.end) == (NOW + timedelta(seconds=30), NOW + timedelta(seconds=90))
    assert first.worst is FAIL and first.kinds == ("semantic", "latency")
    assert first.reasons == ("cosine 0.71 < 0.8", "p95 3x")
    assert second.start == NOW + timedelta(seconds=120) and second.end is None and second.reasons == ("garbled",)
    assert bad_windows([_r(0, SEM, DEG), _r(10, SEM, OK)], "a")[0].worst is DEG
    assert bad_windows([_r(0, SEM, OK)], "a") == []


def test_window_at_picks_the_covering_window_else_the_latest_before() -> None:
    windows = bad_windows([_r(0, SEM, FAIL), _r(30, SEM, OK), _r(60, LAT, FAIL)], "a")
    assert window_at(windows, NOW + timedelta(seconds=10)) is windows[0]
    assert window_at(windows, NOW + timedelta(seconds=40)) is windows[0]  # between: the one that ended
    assert window_at(windows, NOW + timedelta(seconds=600)) is windows[1]  # still open
    assert window_at(windows, None) is windows[1]
    assert window_at(windows, NOW - timedelta(seconds=1)) is None and window_at([], None) is None


def test_verdicts_at_are_the_latest_of_each_kind_before_the_moment() -> None:
    results = [_r(0, SEM, OK), _r(30, SEM, FAIL), _r(40, LAT, OK), _r(90, SEM, OK), _r(35, SEM, OK, instance="b")]
    got = verdicts_at(results, "a", NOW + timedelta(seconds=60))
    assert [(r.kind, r.verdict) for r in got] == [(LAT, OK), (SEM, FAIL)]
    assert verdicts_at(results, "a", NOW + timedelta(minutes=30)) == []  # too old to describe that moment


def test_without_the_chosen_instance_the_request_goes_where_its_own_policy_sends_it() -> None:
    config = make_config()
    ctx = DecisionContext(request_id="r1", features=features(), intent="chat", now=NOW,
                          quality=QualityTable(config.models).snapshot())
    doc = policy_document(config, None)
    record = PolicyRecord(policy_hash=document_hash(doc), ts=NOW, router_version="t", document=canonical(doc))
    trace = live(config, healthy(), ctx).model_copy(update={"policy_hash": record.policy_hash})
    chosen = trace.selected_instance
    assert chosen is not None
    shelf = PolicyShelf({record.policy_hash: record}.get)
    moved = without(trace, chosen, shelf)
    assert not moved.startswith(("unknown", "nowhere")) and chosen not in moved.split(" / ")
    runner_up = next(c for c in sorted(trace.candidates, key=lambda c: c.rank or 99) if c.instance != chosen)
    assert moved == f"{runner_up.model} / {runner_up.instance}"
    others = [BlockedInstance(instance=c.instance, scope="instance", state=2, reason="open")
              for c in trace.candidates if c.instance != chosen]
    alone = trace.model_copy(update={"inputs": DecisionInputs(blocked=others)})
    assert "(fallback: " in without(alone, chosen, shelf)  # every instance out: the router's fallback says so
    assert without(trace.model_copy(update={"policy_hash": "sha256:" + "f" * 64}), chosen, shelf).startswith(
        "unknown: its policy is not stored")
