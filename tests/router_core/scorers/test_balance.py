"""balance-scorer: 1 - running / max_concurrency of the candidate's model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from schemas.config import ModelProfile
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

TYPE = "balance-scorer"
EIGHT_SLOTS = {"big": ModelProfile(max_concurrency=8)}


@dataclass(frozen=True)
class Case:
    id: str
    pool: list[dict[str, Any]]  # candidate() keyword arguments
    expected: list[float]
    profiles: dict[str, ModelProfile] = field(default_factory=dict)


CASES = [
    Case("idle", [{"running": 0}], [1.0]),
    Case("quarter-busy", [{"running": 4}], [0.75]),
    Case("model-profile-concurrency", [{"model": "big", "running": 4}], [0.5], EIGHT_SLOTS),
    Case("per-model", [{"model": "big", "running": 4}, {"model": "small", "running": 4}], [0.5, 0.75], EIGHT_SLOTS),
    Case("missing-gauge-counts-as-queue-cap", [{"running": None}], [1 - 10 / 16]),
    Case("over-capacity-is-negative-raw", [{"running": 20}], [-0.25]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE, profiles=case.profiles)
    assert scorer.name == "balance"
    got = scorer.score([candidate(f"i{n}", **kw) for n, kw in enumerate(case.pool)], context())
    assert got == pytest.approx(case.expected)


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"max_concurrency": 8}, "max_concurrency"))


def test_the_router_records_the_step_and_clamps() -> None:
    cfg = plugins_config([{"type": TYPE, "weight": 0.5}], sections={"models": {"big": {"max_concurrency": 8}}})
    state = healthy() | {"big-a": snap("big-a", running=2), "big-b": snap("big-b", running=10),
                         "small-a": snap("small-a", running=8)}
    ranked, trace = decide(state, cfg)
    assert ranked == ["big-a", "small-a", "big-b"]
    # big-b: 1 - 10/8 = -0.25, clamped to 0 by the runner
    assert_score_step(trace, "balance", TYPE, 0.5, {"big-a": 0.75, "big-b": 0.0, "small-a": 0.5})
    assert {c.instance: c.total for c in trace.candidates} == pytest.approx(
        {"big-a": 0.375, "big-b": 0.0, "small-a": 0.25})
