"""zone-filter: membership of InstanceSpec.zone in the allowed zones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.router_core.conftest import decide
from tests.router_core.plugin_kit import (
    BadParams,
    assert_filter_step,
    assert_refused,
    build,
    candidate,
    context,
    fleet_state,
    instance,
    plugins_config,
    weights,
)

TYPE = "zone-filter"


@dataclass(frozen=True)
class Case:
    id: str
    zones: list[str]
    zone: str
    reason: str | None  # None: kept


CASES = [
    Case("allowed", ["eu"], "eu", None),
    Case("one-of-several", ["us", "eu"], "eu", None),
    Case("outside", ["eu"], "us", "zone 'us' not in ['eu']"),
    Case("sorted-in-reason", ["us", "eu"], "ap", "zone 'ap' not in ['eu', 'us']"),
    Case("case-sensitive", ["eu"], "EU", "zone 'EU' not in ['eu']"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE, name="residency", zones=case.zones)
    v = flt.check(candidate(spec={"zone": case.zone}), context())
    if case.reason is None:
        assert v is None
        return
    assert v is not None
    assert (v.constraint, v.metric, v.op, v.severity, v.reason) == ("residency", "zone", "in", "hard", case.reason)
    assert v.threshold == float(len(set(case.zones)))


BAD = [BadParams("empty", {"zones": []}, "zones"), BadParams("missing", {}, "zones"),
       BadParams("unknown-key", {"zones": ["eu"], "zone": "eu"}, "zone"),
       BadParams("not-a-list", {"zones": "eu"}, "zones")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "residency", "parameters": {"zones": ["eu", "eu-west"]}},
                          {"type": "kv-cache-scorer", "weight": 1.0}],
                         instances=[instance("a", zone="eu"), instance("b", zone="us"), instance("c", zone="eu-west")])
    ranked, trace = decide(fleet_state(cfg, c={"kv_cache_usage": 0.3}), cfg)
    assert ranked == ["a", "c"]
    assert_filter_step(trace, "residency", TYPE, kept=2, rejected=["b"])
    assert weights(trace) == [("mem", 1.0, "mem/kv-cache-scorer")]
    (b,) = [c for c in trace.candidates if c.instance == "b"]
    assert not b.feasible and b.violations[0].constraint == "residency" and b.rank is None


def test_router_zones_derive_the_default_named_filter() -> None:
    cfg = plugins_config(None, instances=[instance("a", zone="eu"), instance("b", zone="us")],
                         zones=["us"])
    ranked, trace = decide(fleet_state(cfg), cfg)
    assert ranked == ["b"]
    assert_filter_step(trace, "zone", TYPE, kept=1, rejected=["a"])
