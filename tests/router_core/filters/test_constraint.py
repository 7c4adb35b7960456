"""constraint-filter: the hysteresis latch when the snapshot has one, else the instantaneous value; soft ramp."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from router_core.decide.builtin import build_router
from schemas import LatchState
from tests.router_core.conftest import NOW, decide, healthy, snap
from tests.router_core.plugin_kit import (
    BadParams,
    assert_filter_step,
    assert_refused,
    build,
    candidate,
    context,
    plugins_config,
    weights,
)

TYPE = "constraint-filter"
KV = {"metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.80}
SINCE = NOW - timedelta(seconds=30)


@dataclass(frozen=True)
class Case:
    id: str
    params: dict[str, Any]
    gauges: dict[str, Any]
    expect: tuple[Any, ...] | None  # (severity, value, threshold, score_factor, reason); None: no violation
    latches: list[LatchState] = field(default_factory=list)
    iid: str = "i"
    model: str = "m"
    age: float = 0.5


UNTIL_KV = "latched out until 0.8 holds for 5s"
CASES = [
    Case("latched-out", KV, {"kv_cache_usage": 0.91},
         ("hard", 0.91, 0.85, None, f"kv_cache_usage 0.91 broke <= 0.85; {UNTIL_KV}"),
         [LatchState(constraint="c", out=True, value=0.91, since=SINCE)]),
    Case("latched-in-above-threshold", KV, {"kv_cache_usage": 0.9}, None,
         [LatchState(constraint="c", out=False, value=0.9)]),
    Case("latch-value-wins-over-gauge", KV, {"kv_cache_usage": 0.2},
         ("hard", 0.95, 0.85, None, f"kv_cache_usage 0.95 broke <= 0.85; {UNTIL_KV}"),
         [LatchState(constraint="c", out=True, value=0.95)]),
    Case("other-constraint-latch-ignored", KV, {"kv_cache_usage": 0.5}, None,
         [LatchState(constraint="other", out=True, value=0.99)]),
    Case("no-latch-broken", KV, {"kv_cache_usage": 0.91},
         ("hard", 0.91, 0.85, None, f"kv_cache_usage 0.91 broke <= 0.85; {UNTIL_KV}")),
    Case("no-latch-holds", KV, {"kv_cache_usage": 0.85}, None),
    Case("no-kv-data-is-full", KV, {"kv_cache_usage": None},
         ("hard", 1.0, 0.85, None, f"kv_cache_usage 1 broke <= 0.85; {UNTIL_KV}")),
    Case("no-error-rate-data-holds", {"metric": "error_rate", "threshold": 0.2}, {"error_rate": None}, None),
    Case("no-warmup-data-breaks", {"metric": "warmup_progress", "op": ">=", "threshold": 0.5},
         {"warmup_progress": None},
         ("hard", None, 0.5, None, "no data broke >= 0.5; latched out until 0.5 holds for 5s")),
    Case("lower-bound", {"metric": "warmup_progress", "op": ">=", "threshold": 0.5, "enter_for": 2.5},
         {"warmup_progress": 0.3},
         ("hard", 0.3, 0.5, None, "warmup_progress 0.3 broke >= 0.5; latched out until 0.5 holds for 2.5s")),
    Case("suspect-queue-decays", {"metric": "queue", "threshold": 8.5}, {"queue": 8.0},
         ("hard", 9.0, 8.5, None, "queue 9 broke <= 8.5; latched out until 8.5 holds for 5s"), age=4.0),
    Case("soft-ramp-half", KV | {"soft_threshold": 0.75}, {"kv_cache_usage": 0.8},
         ("soft", 0.8, 0.75, 0.5, "kv_cache_usage 0.8 in the ramp zone: score x0.50"),
         [LatchState(constraint="c", out=False, value=0.8)]),
    Case("soft-below-ramp", KV | {"soft_threshold": 0.75}, {"kv_cache_usage": 0.7}, None),
    Case("soft-but-latched-out", KV | {"soft_threshold": 0.75}, {"kv_cache_usage": 0.9},
         ("hard", 0.9, 0.85, None, f"kv_cache_usage 0.9 broke <= 0.85; {UNTIL_KV}"),
         [LatchState(constraint="c", out=True, value=0.9)]),
    Case("scoped-to-other-model", KV | {"models": ["big"]}, {"kv_cache_usage": 0.95}, None, model="small"),
    Case("scoped-to-this-model", KV | {"models": ["big"]}, {"kv_cache_usage": 0.95},
         ("hard", 0.95, 0.85, None, f"kv_cache_usage 0.95 broke <= 0.85; {UNTIL_KV}"), model="big"),
    Case("scoped-to-this-instance", KV | {"instances": ["x"]}, {"kv_cache_usage": 0.95},
         ("hard", 0.95, 0.85, None, f"kv_cache_usage 0.95 broke <= 0.85; {UNTIL_KV}"), iid="x"),
    Case("scoped-to-other-instance", KV | {"instances": ["x"]}, {"kv_cache_usage": 0.95}, None, iid="y"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE, name="c", **case.params)
    v = flt.check(candidate(case.iid, case.model, age=case.age, latches=case.latches, **case.gauges), context())
    if case.expect is None:
        assert v is None
        return
    assert v is not None
    severity, value, threshold, factor, reason = case.expect
    assert (v.constraint, v.metric, v.op) == ("c", case.params["metric"], case.params.get("op", "<="))
    assert (v.severity, v.threshold, v.reason) == (severity, threshold, reason)
    assert v.score_factor == (None if factor is None else pytest.approx(factor))
    assert v.value == (None if value is None else pytest.approx(value))
    latch = next((la for la in case.latches if la.constraint == "c"), None)
    assert v.since == (latch.since if latch is not None and severity == "hard" else None)


def test_the_filter_carries_its_named_spec() -> None:
    flt = build(TYPE, name="kv-cache", **KV)
    assert (flt.spec.name, flt.spec.metric, flt.spec.threshold, flt.spec.enter_bound) == (
        "kv-cache", "kv_cache_usage", 0.85, 0.80)


BAD = [BadParams("missing-metric", {"threshold": 1}, "metric"),
       BadParams("unknown-metric", {"metric": "gpu", "threshold": 1}, "metric"),
       BadParams("unknown-op", {"metric": "queue", "op": "==", "threshold": 1}, "op"),
       BadParams("negative-dwell", {"metric": "queue", "threshold": 1, "exit_for": -1}, "exit_for"),
       BadParams("soft-above-threshold", {"metric": "queue", "threshold": 1, "soft_threshold": 2}, ""),
       BadParams("name-is-not-a-parameter", {"metric": "queue", "threshold": 1, "name": "q"}, "name"),
       BadParams("unknown-key", {"metric": "queue", "threshold": 1, "bogus": 2}, "bogus")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_one_step_per_constraint() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "kv-cache", "parameters": KV | {"soft_threshold": 0.4}},
                          {"type": TYPE, "name": "hot-queue", "parameters": {"metric": "queue", "threshold": 3}},
                          {"type": "kv-cache-scorer", "weight": 1.0}])
    out = LatchState(constraint="kv-cache", out=True, value=0.91)
    # big-a KV .5: soft ramp 1 - (.5 - .4) / (.85 - .4) = 7/9; big-b latched out; small-a queue 4 > 3.
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.91, latches=[out])}, cfg)
    assert ranked == ["big-a"]
    assert_filter_step(trace, "kv-cache", TYPE, kept=2, rejected=["big-b"])
    assert_filter_step(trace, "hot-queue", TYPE, kept=1, rejected=["small-a"])
    assert weights(trace) == [("mem", 1.0, "mem/kv-cache-scorer")]
    (a,) = [c for c in trace.candidates if c.instance == "big-a"]
    assert a.feasible and a.weight_factor == pytest.approx(7 / 9)
    assert a.total == pytest.approx(0.5 * 7 / 9)


def test_the_policy_hands_the_constraints_to_the_state_view() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "hot-queue", "parameters": {"metric": "queue", "threshold": 3}},
                          {"type": "context-window-filter"}, {"type": "kv-cache-scorer", "weight": 1.0}])
    (spec,) = build_router(cfg).policy.constraints
    assert (spec.name, spec.metric, spec.threshold) == ("hot-queue", "queue", 3)
