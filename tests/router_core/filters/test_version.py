"""version-filter: instances of a model with a rule must declare a version at or above its minimum."""

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

TYPE = "version-filter"
RULES = {"big": "2.0", "huge": "9.1"}


@dataclass(frozen=True)
class Case:
    id: str
    model: str
    version: str | None
    reason: str | None  # None: kept


CASES = [
    Case("newer", "big", "2.1", None),
    Case("equal", "big", "2.0", None),
    Case("longer-and-newer", "big", "2.0.1", None),
    Case("older", "big", "1.9", "big needs version >= 2.0, instance has 1.9"),
    Case("undeclared", "big", None, "big needs version >= 2.0, instance has none declared"),
    Case("numeric-not-lexicographic", "huge", "10.0", None),
    Case("numeric-older", "huge", "9.0.9", "huge needs version >= 9.1, instance has 9.0.9"),
    Case("model-without-rule", "small", None, None),
    Case("model-without-rule-any-version", "small", "0.1", None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE, name="compliance", min_versions=RULES)
    v = flt.check(candidate(model=case.model, spec={"version": case.version}), context())
    if case.reason is None:
        assert v is None
        return
    assert v is not None
    assert (v.constraint, v.metric, v.op, v.value, v.severity, v.reason) == (
        "compliance", "version", ">=", None, "hard", case.reason)


def test_a_version_without_trailing_zeros_equals_the_rule() -> None:
    flt = build(TYPE, min_versions={"big": "2.0"})
    assert flt.check(candidate(model="big", spec={"version": "2"}), context()) is None


BAD = [BadParams("empty", {"min_versions": {}}, "min_versions"),
       BadParams("missing", {}, "min_versions"),
       BadParams("not-dotted-digits", {"min_versions": {"big": "v2"}}, "min_versions.big"),
       BadParams("unknown-key", {"min_versions": {"big": "2"}, "strict": True}, "strict")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


FLEET = [instance("big-1", "big", version="2.1"), instance("big-2", "big", version="1.4"),
         instance("big-3", "big"), instance("small-1", "small")]


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "compliance", "parameters": {"min_versions": {"big": "2.0"}}},
                          {"type": "kv-cache-scorer", "weight": 1.0}], instances=FLEET)
    ranked, trace = decide(fleet_state(cfg, small_1={"kv_cache_usage": 0.5}), cfg)
    assert ranked == ["big-1", "small-1"]
    assert_filter_step(trace, "compliance", TYPE, kept=2, rejected=["big-2", "big-3"])
    assert weights(trace) == [("mem", 1.0, "mem/kv-cache-scorer")]


def test_router_min_versions_derive_the_default_named_filter() -> None:
    cfg = plugins_config(None, instances=FLEET, min_versions={"big": "1.4"})
    ranked, trace = decide(fleet_state(cfg), cfg)
    assert sorted(ranked) == ["big-1", "big-2", "small-1"]
    assert_filter_step(trace, "version", TYPE, kept=3, rejected=["big-3"])
