"""cost-scorer: (max - cost) / (max - min) over the pool's base costs; all equal: all 1."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.router_core.conftest import decide, features, healthy
from tests.router_core.plugin_kit import (
    BadParams,
    assert_refused,
    assert_score_step,
    build,
    candidate,
    context,
    plugins_config,
)

TYPE = "cost-scorer"


@dataclass(frozen=True)
class Case:
    id: str
    costs: list[float]
    expected: list[float]


CASES = [
    Case("spread", [1.0, 1.8, 3.0], [1.0, 0.6, 0.0]),
    Case("order-does-not-matter", [3.0, 1.0, 2.0], [0.0, 1.0, 0.5]),
    Case("all-equal", [2.0, 2.0], [1.0, 1.0]),
    Case("single", [5.0], [1.0]),
    Case("free-and-paid", [0.0, 4.0], [1.0, 0.0]),
    Case("empty-pool", [], []),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE)
    pool = [candidate(f"i{n}", spec={"cost": {"base": cost}}) for n, cost in enumerate(case.costs)]
    assert scorer.score(pool, context()) == pytest.approx(case.expected)


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"surge": True}, "surge"))


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "weight": 2.0}])
    ranked, trace = decide(healthy(), cfg)  # FLEET: big-* cost 1.8, small-a 1.0
    assert ranked[0] == "small-a"
    assert_score_step(trace, "cost", TYPE, 2.0, {"big-a": 0.0, "big-b": 0.0, "small-a": 1.0})
    assert {c.instance: c.total for c in trace.candidates} == pytest.approx(
        {"big-a": 0.0, "big-b": 0.0, "small-a": 2.0})


def test_the_pool_is_what_the_filters_kept() -> None:
    cfg = plugins_config([{"type": "context-window-filter"}, {"type": TYPE, "weight": 1.0}])
    _, trace = decide(healthy(), cfg, feats=features(tokens=9000))  # small-a (8k window) filtered out
    assert_score_step(trace, "cost", TYPE, 1.0, {"big-a": 1.0, "big-b": 1.0})
