"""error-rate-scorer: 1 - error_rate of the router's window; no traffic yet scores 1."""

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

TYPE = "error-rate-scorer"


@dataclass(frozen=True)
class Case:
    id: str
    error_rate: float | None
    expected: float


CASES = [
    Case("no-traffic", None, 1.0),
    Case("no-errors", 0.0, 1.0),
    Case("quarter", 0.25, 0.75),
    Case("all-failing", 1.0, 0.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE)
    assert scorer.name == "error"
    assert scorer.score([candidate(error_rate=case.error_rate)], context()) == pytest.approx([case.expected])


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"window_s": 10}, "window_s"))


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "reliability", "weight": 1.0}])
    state = healthy() | {"big-a": snap("big-a", error_rate=0.1), "big-b": snap("big-b", error_rate=0.5)}
    ranked, trace = decide(state, cfg)
    assert ranked == ["small-a", "big-a", "big-b"]
    assert_score_step(trace, "reliability", TYPE, 1.0, {"big-a": 0.9, "big-b": 0.5, "small-a": 1.0})


def test_the_seed_preset_weighs_it_a_tenth() -> None:
    _, trace = decide(healthy() | {"big-a": snap("big-a", error_rate=0.1)})
    assert_score_step(trace, "error", TYPE, 0.1, {"big-a": 0.9}, profile="seed-instance-score")
