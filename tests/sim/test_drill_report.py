"""The drill report from synthetic observations: stop times, windows, cost, accuracy, summary."""

from __future__ import annotations

from sim.behaviour import builtin_config
from sim.drill import build_report, format_summary
from sim.drill_run import DrillRun
from sim.scenarios import Scenario
from sim.traffic import TrafficResult

T0 = 1_000.0
SCENARIO = Scenario.model_validate({
    "name": "synthetic", "description": "made up", "duration_s": 20,
    "traffic": {"curve": {"rps": 10, "surge_start_s": 5, "surge_duration_s": 5}},
    "faults": [{"at_s": 5, "instance": 1, "kind": "crash", "duration_s": 10},
               {"at_s": 5, "instance": 0, "kind": "drift"}],
})
FLEET = builtin_config(4, 9000).fleet.instances


def _result(i: int, at: float, instance: str, status: str = "ok", latency: float = 100.0,
            grade: str | None = "correct") -> TrafficResult:
    model = next(s.model for s in FLEET if s.id == instance)
    return TrafficResult(index=i, cls="ticket", lang="en", query_hash="sha256:x", status=status,  # type: ignore[arg-type]
                         http_status=200 if status == "ok" else 502, latency_ms=latency, request_id=f"r{i}",
                         sent_at_s=at, instance=instance, model=model, grade=grade if status == "ok" else None,
                         expected_model="deepseek-coder-6b-fp16", feedback_status=202)


def _run() -> DrillRun:
    ids = [s.id for s in FLEET]  # v4-32k-0, coder-fp16-1, coder-int4-2, chat-7b-3
    results, attempts = [], {}
    for i in range(200):  # one request every 0.1 s, round robin until the crash is noticed
        at = i * 0.1
        target = ids[i % 4]
        tried = [target]
        if target == "coder-fp16-1" and at >= 5:
            target = "coder-int4-2"
            tried = ["coder-fp16-1", target] if at < 6.5 else [target]  # retried until 6.5 s, then avoided
        results.append(_result(i, at, target, latency=3000.0 if 5 <= at < 10 else 100.0))
        attempts[f"r{i}"] = tried
    run = DrillRun(SCENARIO, T0, results, attempts)
    run.injected = [{"instance": "coder-fp16-1", "id": "f1", "kind": "crash", "started_at": T0 + 5, "ended_at": None}]
    return run


def test_stop_time_and_counts_per_fault():
    log = [{"event": "end", "instance": "coder-fp16-1", "id": "f1", "kind": "crash", "spec": {"kind": "crash"},
            "started_at": T0 + 5, "ended_at": T0 + 15, "end_reason": "duration", "requests_seen": 0,
            "requests_affected": 0},
           {"event": "start", "instance": "v4-32k-0", "id": "f1", "kind": "drift", "spec": {"kind": "drift"},
            "started_at": T0 + 5, "ended_at": None, "end_reason": None}]
    report = build_report(_run(), log, FLEET, speed=2.0)
    crash = next(f for f in report.faults if f.kind == "crash")
    assert (crash.onset_s, crash.end_s, crash.end_reason) == (5.0, 15.0, "duration")
    assert crash.sent_before_onset == 13 and crash.served_after_onset == 0
    assert crash.sent_after_onset == 3 and crash.stopped_after_s == 1.1  # 5.3, 5.7 and 6.1 s
    assert crash.window.requests == 100 and crash.sim_requests_seen == 0
    drift = next(f for f in report.faults if f.kind == "drift")
    assert drift.end_s is None and drift.stopped_after_s is None and drift.sent_after_onset == 37  # i = 52, 56, ... 196


def test_overall_figures_surge_windows_and_cost():
    report = build_report(_run(), [], FLEET)
    assert report.requests == 200 and report.overall.errors == 0 and report.accuracy == 1.0
    assert report.served_by["coder-fp16-1"] == 13 and report.off_target == 200 - 13
    assert report.feedback_accepted == 200 and report.feedback_wrong == 0  # every answer right: no misroute
    assert report.surge is not None and report.surge["during"].requests == 50
    assert report.surge["during"].sla_attainment == 0.0 and report.surge["before"].sla_attainment == 1.0
    price = {s.id: s.cost for s in FLEET}
    expected = sum(price[r.instance].base * (price[r.instance].surge_multiplier if 5 <= r.sent_at_s < 10 else 1)
                   for r in _run().results)
    assert abs(report.cost_total - expected) < 1e-6
    text = format_summary(report)
    assert "drill synthetic: 200 requests" in text and "fault crash on coder-fp16-1" in text
    assert "surge/during" in text and "query" not in text
    assert "not the expected model 187  feedback accepted 200 (0 wrong: misroutes)" in text
    assert "misroutes" not in report.model_dump()


def test_misroutes_are_the_feedback_marked_wrong():
    run = _run()
    run.results = [*(_result(i, i / 10, "coder-fp16-1", grade="wrong") for i in range(10)),  # the expected model
                   *(_result(i, i / 10, "chat-7b-3") for i in range(10, 15))]  # another model, answering right
    run.attempts = {}
    report = build_report(run, [], FLEET)
    assert (report.off_target, report.feedback_wrong) == (5, 10)
    assert "not the expected model 5  feedback accepted 15 (10 wrong: misroutes)" in format_summary(report)


def test_errors_and_an_instance_never_used():
    run = _run()
    run.results = [_result(0, 1.0, "chat-7b-3", status="error"), _result(1, 6.0, "chat-7b-3")]
    run.attempts = {}
    run.injected = [{"instance": "coder-int4-2", "id": "f9", "kind": "slow", "started_at": T0 + 2, "ended_at": None}]
    report = build_report(run, [], FLEET)
    assert report.error_rate == 0.5 and report.overall.latency_ms.p99 == 100.0
    slow = report.faults[0]
    assert slow.sent_before_onset == 0 and slow.sent_after_onset == 0 and slow.stopped_after_s is None
    assert "never sent it anything" in format_summary(report)
