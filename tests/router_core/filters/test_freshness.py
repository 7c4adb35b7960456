"""freshness-filter: state never scraped, or older than max_age_s, takes the instance out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from router_core.decide.builtin import build_router
from tests.router_core.conftest import NOW, decide, healthy, make_config, snap
from tests.router_core.plugin_kit import (
    BadParams,
    assert_filter_step,
    assert_refused,
    build,
    candidate,
    context,
    plugins_config,
    route,
    step,
    weights,
)

TYPE = "freshness-filter"


@dataclass(frozen=True)
class Case:
    id: str
    age: float | None
    reason: str | None  # None: kept
    max_age_s: float = 5.0
    scrape_error: str | None = None


CASES = [
    Case("fresh", 0.5, None),
    Case("suspect-but-not-stale", 4.0, None),
    Case("exactly-max-age", 5.0, None),
    Case("older-than-max-age", 5.5, "metrics 5.5s old"),
    Case("never-scraped", None, "never scraped"),
    Case("never-scraped-with-error", None, "never scraped (HTTP 500)", scrape_error="HTTP 500"),
    Case("stale-with-error", 7.0, "metrics 7.0s old (timeout)", scrape_error="timeout"),
    Case("tighter-max-age", 3.5, "metrics 3.5s old", max_age_s=3.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_check(case: Case) -> None:
    flt = build(TYPE, max_age_s=case.max_age_s)
    v = flt.check(candidate(age=case.age, scrape_error=case.scrape_error), context())
    if case.reason is None:
        assert v is None
        return
    assert v is not None
    assert (v.constraint, v.metric, v.op, v.threshold, v.severity, v.reason) == (
        "freshness", "state_age_s", "<=", case.max_age_s, "hard", case.reason)
    assert v.value == case.age


def test_the_default_max_age_is_five_seconds() -> None:
    flt = build(TYPE)
    assert flt.check(candidate(age=5.0), context()) is None
    assert flt.check(candidate(age=5.1), context()) is not None


BAD = [BadParams("zero", {"max_age_s": 0}, "max_age_s"), BadParams("negative", {"max_age_s": -1}, "max_age_s"),
       BadParams("not-a-number", {"max_age_s": "soon"}, "max_age_s"),
       BadParams("unknown-key", {"stale_after_s": 5}, "stale_after_s")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "fresh", "parameters": {"max_age_s": 3.0}},
                          {"type": "kv-cache-scorer", "weight": 1.0}])
    state = healthy() | {"big-a": snap("big-a", age=3.5), "big-b": snap("big-b", age=None)}
    ranked, trace = decide(state, cfg)
    assert ranked == ["small-a"]
    assert_filter_step(trace, "fresh", TYPE, kept=1, rejected=["big-a", "big-b"])
    assert weights(trace) == [("mem", 1.0, "mem/kv-cache-scorer")]
    reasons = {c.instance: [v.reason for v in c.violations] for c in trace.candidates}
    assert reasons == {"big-a": ["metrics 3.5s old"], "big-b": ["never scraped"], "small-a": []}


def test_scrape_stale_after_s_is_the_derived_max_age() -> None:
    cfg = make_config(scrape={"suspect_after_s": 3.0, "stale_after_s": 8.0})
    state = healthy() | {"big-a": snap("big-a", age=6.0), "big-b": snap("big-b", age=8.5)}
    ranked, trace = decide(state, cfg)
    assert sorted(ranked) == ["big-a", "small-a"]
    assert_filter_step(trace, "freshness", TYPE, kept=2, rejected=["big-b"])
    assert step(trace, "filter/freshness").seq == 2  # first filter, right after analyse and policy


def test_a_max_age_below_the_suspect_age_is_refused() -> None:
    # Verdicts are memoised per snapshot until it is suspect (scrape.suspect_after_s, 3 s by default):
    # a smaller max_age_s would keep a stale instance in, so the configuration is refused instead.
    from router_core.errors import PluginConfigError

    tight = [{"type": TYPE, "parameters": {"max_age_s": 2.0}}, {"type": "kv-cache-scorer", "weight": 1.0}]
    cfg = plugins_config(tight)
    with pytest.raises(PluginConfigError, match=r"max_age_s.*freshness/freshness-filter.*suspect_after_s \(3\)"):
        build_router(cfg)
    early_suspect = {"scrape": {"suspect_after_s": 1.0, "stale_after_s": 5.0}}
    relaxed = plugins_config(tight, sections=early_suspect, on_empty="reject")
    router = build_router(relaxed)
    later = NOW + timedelta(seconds=2.0)  # the snapshots are 2.5 s old: suspect, and beyond max_age_s
    assert route(router, healthy(), now=NOW)[0] != []
    assert route(router, healthy(), now=later)[0] == []
