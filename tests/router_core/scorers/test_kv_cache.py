"""kv-cache-scorer: 1 - staleness-adjusted KV cache usage."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.router_core.conftest import decide, healthy, snap
from tests.router_core.plugin_kit import (
    BadParams,
    assert_refused,
    assert_score_step,
    build,
    candidate,
    context,
    plugins_config,
)

TYPE = "kv-cache-scorer"


@dataclass(frozen=True)
class Case:
    id: str
    kv: float | None
    expected: float
    age: float | None = 0.5


CASES = [
    Case("mostly-free", 0.1, 0.9),
    Case("full", 1.0, 0.0),
    Case("no-gauge-is-full", None, 0.0),
    Case("never-scraped-is-full", 0.1, 0.0, age=None),
    # suspect after 3 s, saturated at 5 s: at 4 s KV .2 has moved halfway to 1 -> .6
    Case("suspect-halfway", 0.2, 0.4, age=4.0),
    Case("suspect-three-quarters", 0.2, 0.2, age=4.5),
    Case("at-suspect-bound-stands", 0.2, 0.8, age=3.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE)
    assert scorer.name == "mem"
    assert scorer.score([candidate(age=case.age, kv_cache_usage=case.kv)], context()) == pytest.approx(
        [case.expected])


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"floor": 0.1}, "floor"))


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "weight": 3.0}])
    ranked, trace = decide(healthy() | {"big-b": snap("big-b", kv=0.2, age=4.0)}, cfg)
    assert ranked == ["small-a", "big-a", "big-b"]  # .7, .5, .4
    assert_score_step(trace, "mem", TYPE, 3.0, {"big-a": 0.5, "big-b": 0.4, "small-a": 0.7})
    assert {c.instance: c.total for c in trace.candidates} == pytest.approx(
        {"big-a": 1.5, "big-b": 1.2, "small-a": 2.1})


def test_the_seed_preset_weighs_it_four_tenths() -> None:
    _, trace = decide(healthy())
    assert_score_step(trace, "mem", TYPE, 0.4, {"big-a": 0.5, "big-b": 0.8, "small-a": 0.7},
                      profile="seed-instance-score")
