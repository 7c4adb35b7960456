from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, generate_latest

from probes.metrics import ProbeMetrics
from schemas.common import ProbeKind, ProbeVerdict
from schemas.probe import ProbeResult, ProbeStatus
from tests.promtext import samples

TS = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def result(kind: ProbeKind, verdict: ProbeVerdict, value: float | None, latency_ms: float | None = 120.0,
           instance: str = "a") -> ProbeResult:
    return ProbeResult(probe_id="p", ts=TS, instance=instance, model="m1", kind=kind, verdict=verdict,
                       value=value, latency_ms=latency_ms)


def test_results_and_verdicts_are_exported_with_their_labels() -> None:
    reg = CollectorRegistry()
    m = ProbeMetrics(reg)
    m.record(result(ProbeKind.SEMANTIC, ProbeVerdict.FAILED, 0.41, latency_ms=850.0))
    m.record(result(ProbeKind.SYNTAX, ProbeVerdict.OK, 1.0, latency_ms=None))
    m.set_status("a", "m1", ProbeStatus(kind=ProbeKind.SEMANTIC, verdict=ProbeVerdict.FAILED, since=TS))
    m.observe_slip(0.02)
    m.observe_slip(-0.5)
    m.record_skipped(ProbeKind.LATENCY)
    s = samples(generate_latest(reg).decode())
    assert s.value("routelens_probe_success", instance="a", model="m1", kind="semantic") == 0.0
    assert s.value("routelens_probe_success", instance="a", model="m1", kind="syntax") == 1.0
    assert s.value("routelens_probe_similarity", instance="a", model="m1") == 0.41
    assert s.value("routelens_probe_duration_seconds_count", kind="semantic") == 1.0
    assert s.value("routelens_probe_duration_seconds_sum", kind="semantic") == 0.85
    assert s.value("routelens_probe_duration_seconds_count", kind="syntax", default=0.0) == 0.0
    for verdict, want in (("ok", 0.0), ("degraded", 0.0), ("failed", 1.0)):
        assert s.value("routelens_probe_verdict", instance="a", model="m1", kind="semantic", verdict=verdict) == want
    assert s.value("routelens_probe_schedule_slip_seconds_count") == 2.0
    assert s.value("routelens_probe_schedule_slip_seconds_sum") == 0.02
    assert s.value("routelens_probe_last_result_timestamp_seconds") == TS.timestamp()
    assert s.value("routelens_probe_skipped_total", kind="latency") == 1.0
    assert s.value("routelens_probe_skipped_total", kind="syntax") == 0.0


def test_a_verdict_change_moves_the_one_and_forget_drops_the_instance() -> None:
    reg = CollectorRegistry()
    m = ProbeMetrics(reg)
    m.set_status("a", "m1", ProbeStatus(kind=ProbeKind.LATENCY, verdict=ProbeVerdict.DEGRADED, since=TS))
    m.set_status("a", "m1", ProbeStatus(kind=ProbeKind.LATENCY, verdict=ProbeVerdict.OK, since=TS))
    s = samples(generate_latest(reg).decode())
    assert s.value("routelens_probe_verdict", instance="a", model="m1", kind="latency", verdict="ok") == 1.0
    assert s.value("routelens_probe_verdict", instance="a", model="m1", kind="latency", verdict="degraded") == 0.0
    m.forget("a", "m1")
    assert "instance=\"a\"" not in generate_latest(reg).decode()


def test_two_registries_do_not_collide() -> None:
    ProbeMetrics(CollectorRegistry())
    ProbeMetrics(CollectorRegistry())
