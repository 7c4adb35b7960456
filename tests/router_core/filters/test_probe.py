"""probe-filter: failed syntax or semantic verdicts take an instance out; degraded latency scales it down."""

from __future__ import annotations

from datetime import timedelta

import pytest

from schemas.probe import ProbeStatus
from tests.router_core.conftest import NOW, decide, healthy, make_config, snap


def status(kind: str, verdict: str, value: float | None = None, threshold: float | None = None) -> ProbeStatus:
    return ProbeStatus(kind=kind, verdict=verdict, since=NOW - timedelta(seconds=42), value=value,
                       threshold=threshold, reason="seen by the test")


def with_probes(iid: str, *probes: ProbeStatus) -> dict:
    state = healthy()
    base = state[iid]
    state[iid] = snap(iid, kv=base.kv_cache_usage, queue=base.queue, probes=list(probes))
    return state


@pytest.mark.parametrize(("probes", "feasible", "factor"), [
    ((status("semantic", "failed", 0.31, 0.65),), False, None),
    ((status("syntax", "failed", 0.0, 1.0),), False, None),
    ((status("latency", "degraded", 140.0, 120.0),), True, 0.5),
    ((status("latency", "failed"),), True, 0.5),  # latency never ejects: it is a soft term
    ((status("semantic", "degraded", 0.7, 0.65),), True, None),  # only failed ejects
    ((status("syntax", "ok", 1.0, 1.0), status("semantic", "ok", 0.9, 0.65)), True, None),
    ((status("latency", "degraded", 140.0, 120.0), status("syntax", "failed")), False, None),  # hard wins
])
def test_probe_verdicts_in_the_snapshot_decide_feasibility(probes: tuple[ProbeStatus, ...], feasible: bool,
                                                           factor: float | None) -> None:
    _, trace = decide(with_probes("big-a", *probes))
    cand = next(c for c in trace.candidates if c.instance == "big-a")
    assert cand.feasible is feasible
    probe_violations = [v for v in cand.violations if v.constraint == "probe"]
    if feasible and factor is None:
        assert probe_violations == []
        return
    (v,) = probe_violations
    bad = next(p for p in probes if p.verdict != "ok" and (not feasible or p.kind == "latency")
               and (feasible or p.kind != "latency"))
    assert v.metric == f"probe_{bad.kind.value}" and v.value == bad.value
    assert v.threshold == (0.0 if bad.threshold is None else bad.threshold)  # no bound: 0
    assert f"{bad.kind.value} probe {bad.verdict.value} since" in v.reason and "seen by the test" in v.reason
    assert v.severity == ("soft" if feasible else "hard") and v.score_factor == factor
    if feasible:
        assert cand.weight_factor == factor


def test_a_failed_instance_is_never_selected_and_the_others_still_serve() -> None:
    state = with_probes("big-a", status("semantic", "failed", 0.2, 0.65))
    for rid in ("r1", "r2", "r3", "r4"):
        ranked, trace = decide(state, request_id=rid)
        assert "big-a" not in ranked and trace.selected_instance != "big-a"


def test_the_filter_is_not_built_when_probes_are_off() -> None:
    state = with_probes("big-a", status("semantic", "failed", 0.2, 0.65))
    _, trace = decide(state, make_config(probes={"enabled": False}))
    assert next(c for c in trace.candidates if c.instance == "big-a").feasible


def test_degraded_factor_is_a_parameter() -> None:
    cfg = make_config(router={"plugins": [{"type": "freshness-filter"},
                                          {"type": "probe-filter", "parameters": {"degraded_factor": 0.2}},
                                          {"type": "kv-cache-scorer", "weight": 1.0},
                                          {"type": "max-score-picker"}]})
    _, trace = decide(with_probes("big-a", status("latency", "degraded", 140.0, 120.0)), cfg)
    assert next(c for c in trace.candidates if c.instance == "big-a").weight_factor == 0.2
