"""latency-scorer: 1 - predicted latency / latency_slo_ms; predicted = base * (1 + backlog / max_concurrency)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from schemas.config import ModelProfile
from tests.router_core.conftest import decide, healthy, make_config, snap
from tests.router_core.plugin_kit import (
    BadParams,
    assert_refused,
    assert_score_step,
    build,
    candidate,
    context,
    plugins_config,
)

TYPE = "latency-scorer"
SLOW = {"m": ModelProfile(latency_ms=900, max_concurrency=8)}


@dataclass(frozen=True)
class Case:
    id: str
    gauges: dict[str, Any]
    expected: float
    params: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, ModelProfile] = field(default_factory=dict)
    age: float = 0.5


# Defaults: profile latency 500 ms, 16 slots; SLO 3000 ms.
CASES = [
    Case("idle", {}, 1 - 500 / 3000),
    Case("queued", {"queue": 8}, 1 - 750 / 3000),
    Case("running-beyond-capacity-waits", {"running": 20}, 1 - 625 / 3000),
    Case("running-within-capacity-is-free", {"running": 16}, 1 - 500 / 3000),
    Case("observed-median", {"p50_latency_ms": 1200, "window_requests": 5}, 1 - 1200 / 3000),
    Case("too-few-observations", {"p50_latency_ms": 1200, "window_requests": 4}, 1 - 500 / 3000),
    Case("no-observed-median", {"p50_latency_ms": None, "window_requests": 10}, 1 - 500 / 3000),
    Case("model-profile", {"queue": 4}, 1 - 1350 / 3000, profiles=SLOW),
    Case("tighter-slo", {"queue": 8}, 1 - 750 / 1500, params={"latency_slo_ms": 1500}),
    Case("at-the-slo", {"queue": 16}, 0.0, params={"latency_slo_ms": 1000}),
    Case("beyond-the-slo-is-negative-raw", {}, -0.25, params={"latency_slo_ms": 400}),
    # suspect at 4 s: queue 0 has moved halfway to the cap of 10 -> 5 waiting
    Case("suspect-queue-decays", {"queue": 0}, 1 - 500 * (1 + 5 / 16) / 3000, age=4.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE, profiles=case.profiles, **case.params)
    got = scorer.score([candidate(age=case.age, **case.gauges)], context())
    assert got == pytest.approx([case.expected])


BAD = [BadParams("zero-slo", {"latency_slo_ms": 0}, "latency_slo_ms"),
       BadParams("negative-slo", {"latency_slo_ms": -5}, "latency_slo_ms"),
       BadParams("unknown-key", {"latency_slo": 100}, "latency_slo")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_the_step_and_clamps() -> None:
    cfg = plugins_config([{"type": TYPE, "weight": 1.0, "parameters": {"latency_slo_ms": 1000}}],
                         sections={"models": {"small": {"latency_ms": 250}}})
    state = healthy() | {"big-a": snap("big-a", queue=16), "big-b": snap("big-b", queue=0)}
    ranked, trace = decide(state, cfg)
    # big-a: 500 * 2 = 1000 -> 0; big-b: 500 -> .5; small-a: 250 * (1 + 4/16) = 312.5 -> .6875
    assert ranked == ["small-a", "big-b", "big-a"]
    assert_score_step(trace, "latency", TYPE, 1.0, {"big-a": 0.0, "big-b": 0.5, "small-a": 0.6875})


def test_scoring_latency_slo_ms_is_the_derived_parameter() -> None:
    cfg = make_config(scoring={"preset": "balanced", "latency_slo_ms": 2000})
    _, trace = decide(healthy() | {"big-b": snap("big-b", queue=0)}, cfg)
    assert_score_step(trace, "latency", TYPE, 0.3, {"big-b": 1 - 500 / 2000}, profile="balanced")
