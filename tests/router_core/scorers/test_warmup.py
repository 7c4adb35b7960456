"""warmup-scorer: the warm-up progress gauge; engines that do not report it count as warm."""

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

TYPE = "warmup-scorer"


@dataclass(frozen=True)
class Case:
    id: str
    progress: float | None
    expected: float


CASES = [Case("not-reported", None, 1.0), Case("cold", 0.0, 0.0), Case("warming", 0.3, 0.3), Case("warm", 1.0, 1.0)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE)
    assert scorer.name == "warmup"
    assert scorer.score([candidate(warmup_progress=case.progress)], context()) == pytest.approx([case.expected])


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"ramp_s": 30}, "ramp_s"))


def test_the_router_records_the_step() -> None:
    cfg = plugins_config([{"type": TYPE, "weight": 0.5}])
    state = healthy() | {"big-a": snap("big-a", warmup_progress=0.2), "big-b": snap("big-b", warmup_progress=0.6)}
    ranked, trace = decide(state, cfg)
    assert ranked == ["small-a", "big-b", "big-a"]
    assert_score_step(trace, "warmup", TYPE, 0.5, {"big-a": 0.2, "big-b": 0.6, "small-a": 1.0})
    assert {c.instance: c.total for c in trace.candidates} == pytest.approx(
        {"big-a": 0.1, "big-b": 0.3, "small-a": 0.5})
