"""queue-depth-scorer: 1 - staleness-adjusted queue / queue_norm."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

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

TYPE = "queue-depth-scorer"


@dataclass(frozen=True)
class Case:
    id: str
    queue: float | None
    expected: float
    params: dict[str, Any] = field(default_factory=dict)
    age: float = 0.5


CASES = [
    Case("empty", 0, 1.0),
    Case("half", 5, 0.5),
    Case("own-norm", 2, 0.5, {"queue_norm": 4}),
    Case("at-norm", 10, 0.0),
    Case("beyond-norm-is-negative-raw", 12, -0.2),
    Case("no-gauge-is-the-cap", None, 0.0),
    Case("suspect-decays-toward-the-cap", 2, 1 - 6 / 10, age=4.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE, **case.params)
    assert scorer.name == "queue"
    assert scorer.score([candidate(age=case.age, queue=case.queue)], context()) == pytest.approx([case.expected])


BAD = [BadParams("zero-norm", {"queue_norm": 0}, "queue_norm"),
       BadParams("negative-norm", {"queue_norm": -1}, "queue_norm"),
       BadParams("unknown-key", {"norm": 4}, "norm")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_the_router_records_the_step_and_clamps() -> None:
    cfg = plugins_config([{"type": TYPE, "name": "q", "weight": 1.0, "parameters": {"queue_norm": 5}}])
    state = healthy() | {"big-b": snap("big-b", queue=10)}  # small-a waits 4: .2; big-b 1 - 10/5 -> clamped 0
    ranked, trace = decide(state, cfg)
    assert ranked == ["big-a", "small-a", "big-b"]
    assert_score_step(trace, "q", TYPE, 1.0, {"big-a": 1.0, "big-b": 0.0, "small-a": 0.2})


def test_scoring_queue_norm_is_the_derived_parameter() -> None:
    _, trace = decide(healthy(), make_config(scoring={"queue_norm": 8}))
    assert_score_step(trace, "queue", TYPE, 0.3, {"small-a": 0.5, "big-a": 1.0}, profile="seed-instance-score")
