"""The drill report: per fault, how fast the router stopped sending traffic to the faulty instance.

:func:`build_report` is pure: the traffic's results, each request's attempts (from the gateway's
traces; the ``x-routelens-instance`` header when a trace is missing), and the simulator's fault
records in, a :class:`DrillReport` out. :func:`format_summary` renders it for the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from schemas.fleet import InstanceSpec
from sim.drill_run import DrillRun
from sim.traffic import TrafficResult
from sim.traffic_report import percentile, summarise

__all__ = ["DrillReport", "FaultOutcome", "Percentiles", "build_report", "format_summary"]


class Percentiles(BaseModel):
    """Latency percentiles in milliseconds (None without data)."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


class Window(BaseModel):
    """Client-side figures of the requests sent within a time window."""

    requests: int = 0
    errors: int = 0
    latency_ms: Percentiles = Percentiles()
    sla_attainment: float | None = None


class FaultOutcome(BaseModel):
    """One fault as the router and the clients lived it."""

    instance: str
    kind: str
    fault_id: str
    spec: dict[str, Any]
    onset_s: float
    end_s: float | None
    end_reason: str | None
    sent_before_onset: int
    sent_after_onset: int
    served_after_onset: int
    last_sent_after_s: float | None
    stopped_after_s: float | None
    quiet_s: float
    window: Window
    sim_requests_seen: int | None
    sim_requests_affected: int | None


class DrillReport(BaseModel):
    """The whole drill."""

    scenario: str
    description: str
    started_at: float
    duration_s: float
    speed: float
    requests: int
    overall: Window
    error_rate: float
    cost_total: float
    cost_per_request: float | None
    accuracy: float | None
    off_target: int = Field(description="Answers served by another model than the case's expected one (no misroute "
                                        "by itself).")
    feedback_accepted: int
    feedback_wrong: int = Field(description="Accepted feedback with correct=false: the drill's misroutes, as the app "
                                            "counts them.")
    served_by: dict[str, int]
    surge: dict[str, Window] | None
    faults: list[FaultOutcome]
    inject_errors: list[str]


def _window(run: DrillRun, results: Sequence[TrafficResult]) -> Window:
    lat = [r.latency_ms for r in results if r.status == "ok"]
    sla = run.scenario.sla
    met = sum(1 for r in results if r.status == "ok" and r.latency_ms <= sla.target_ms(r.cls))
    return Window(requests=len(results), errors=sum(r.status == "error" for r in results),
                  latency_ms=Percentiles(p50=percentile(lat, 50), p95=percentile(lat, 95), p99=percentile(lat, 99)),
                  sla_attainment=round(met / len(results), 4) if results else None)


def _tried(run: DrillRun, result: TrafficResult) -> list[str]:
    if result.request_id and result.request_id in run.attempts:
        return run.attempts[result.request_id]
    return [result.instance] if result.instance else []


def _fault(run: DrillRun, record: dict[str, Any]) -> FaultOutcome:
    inst, t0 = str(record["instance"]), run.started_epoch
    onset = float(record["started_at"]) - t0
    end = None if record.get("ended_at") is None else float(record["ended_at"]) - t0
    horizon = end if end is not None else run.scenario.duration_s
    to_inst = [r for r in run.results if inst in _tried(run, r)]
    after = [r for r in to_inst if onset <= r.sent_at_s < horizon]
    before = [r for r in to_inst if r.sent_at_s < onset]
    # "Stopped" means a silence several times the instance's usual gap before the fault.
    usual_gap = onset / len(before) if before and onset > 0 else 1.0 / max(run.scenario.traffic.curve.rps, 1e-9)
    quiet = max(5 * usual_gap, 2 * run.scenario.gateway.scrape.interval_s)
    last = max((r.sent_at_s for r in after), default=None)
    stopped = None
    if last is None:
        stopped = 0.0 if before else None
    elif horizon - last >= quiet:
        stopped = round(last - onset, 3)
    window = [r for r in run.results if onset <= r.sent_at_s < horizon]
    return FaultOutcome(
        instance=inst, kind=str(record["kind"]), fault_id=str(record["id"]), spec=dict(record.get("spec", {})),
        onset_s=round(onset, 3), end_s=None if end is None else round(end, 3), end_reason=record.get("end_reason"),
        sent_before_onset=len(before), sent_after_onset=len(after),
        served_after_onset=sum(r.instance == inst for r in after),
        last_sent_after_s=None if last is None else round(last - onset, 3), stopped_after_s=stopped,
        quiet_s=round(quiet, 3), window=_window(run, window),
        sim_requests_seen=record.get("requests_seen"), sim_requests_affected=record.get("requests_affected"))


def build_report(run: DrillRun, fault_records: Sequence[dict[str, Any]], fleet: Sequence[InstanceSpec],
                 speed: float = 1.0) -> DrillReport:
    """Compute the report of a drill.

    Args:
        run: What :func:`sim.drill_run.execute_drill` observed.
        fault_records: The simulator's records (fault log lines; the latest per fault id wins).
        fleet: The instances, for prices.
        speed: How much faster than written the scenario ran.

    Returns:
        The report.
    """
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in [*run.injected, *fault_records]:
        latest[(str(record["instance"]), str(record["id"]))] = record
    results, curve = run.results, run.scenario.traffic.curve
    cost_of = {spec.id: spec.cost for spec in fleet}
    cost = 0.0
    for r in results:
        if r.status == "ok" and r.instance in cost_of:
            c = cost_of[r.instance]
            cost += c.base * (c.surge_multiplier if curve.in_surge(r.sent_at_s) else 1.0)
    ok = [r for r in results if r.status == "ok"]
    traffic = summarise(results)
    surge = None
    if curve.surge_start_s is not None:
        start, stop = curve.surge_start_s, curve.surge_start_s + curve.surge_duration_s
        surge = {"before": _window(run, [r for r in results if r.sent_at_s < start]),
                 "during": _window(run, [r for r in results if start <= r.sent_at_s < stop]),
                 "after": _window(run, [r for r in results if r.sent_at_s >= stop])}
    overall = _window(run, results)
    return DrillReport(
        scenario=run.scenario.name, description=run.scenario.description, started_at=run.started_epoch,
        duration_s=run.scenario.duration_s, speed=speed, requests=len(results), overall=overall,
        error_rate=round(overall.errors / len(results), 4) if results else 0.0, cost_total=round(cost, 3),
        cost_per_request=round(cost / len(ok), 4) if ok else None,
        accuracy=traffic["accuracy"], off_target=traffic["off_target"],
        feedback_accepted=traffic["feedback_accepted"], feedback_wrong=traffic["feedback_wrong"],
        served_by=traffic["served_by"],
        surge=surge, faults=sorted((_fault(run, rec) for rec in latest.values()), key=lambda f: f.onset_s),
        inject_errors=list(run.inject_errors))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def format_summary(report: DrillReport) -> str:
    """A few lines for the terminal: overall figures, then one line per fault."""
    o = report.overall
    lines = [
        f"drill {report.scenario}: {report.requests} requests in {report.duration_s:g} s (speed x{report.speed:g})",
        f"  errors {o.errors} ({report.error_rate:.1%})  latency p50/p95/p99 {_ms(o.latency_ms.p50)}/"
        f"{_ms(o.latency_ms.p95)}/{_ms(o.latency_ms.p99)} ms  "
        f"SLA {0 if o.sla_attainment is None else o.sla_attainment:.1%}",
        f"  cost {report.cost_total:g}  accuracy {'-' if report.accuracy is None else f'{report.accuracy:.1%}'}  "
        f"not the expected model {report.off_target}  feedback accepted {report.feedback_accepted} "
        f"({report.feedback_wrong} wrong: misroutes)",
    ]
    if report.surge is not None:
        for name, w in report.surge.items():
            lines.append(f"  surge/{name}: {w.requests} requests, {w.errors} errors, p99 {_ms(w.latency_ms.p99)} ms, "
                         f"SLA {0 if w.sla_attainment is None else w.sla_attainment:.1%}")
    for f in report.faults:
        stopped = "never stopped" if f.stopped_after_s is None else f"stopped after {f.stopped_after_s:g} s"
        if not f.sent_before_onset and not f.sent_after_onset:
            stopped = "never sent it anything"
        lines.append(f"  fault {f.kind} on {f.instance} at {f.onset_s:g} s: router {stopped}; "
                     f"{f.sent_after_onset} sent to it after onset; client errors {f.window.errors}/"
                     f"{f.window.requests}; p99 {_ms(f.window.latency_ms.p99)} ms")
    lines.extend(f"  injection failed: {e}" for e in report.inject_errors)
    return "\n".join(lines)
