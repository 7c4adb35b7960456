"""quality-scorer: P(correct) of the candidate's instance (else its model) for the request's class.

Unknown pairs score default.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import pytest

from router_core.decide.builtin import build_router
from router_core.state.quality import QualitySnapshot, QualityTable
from schemas.config import ModelProfile
from tests.router_core.conftest import decide, healthy
from tests.router_core.plugin_kit import (
    BadParams,
    assert_refused,
    assert_score_step,
    build,
    candidate,
    context,
    plugins_config,
)

TYPE = "quality-scorer"
TABLE = {("big", "code"): 0.9, ("small", "code"): 0.3, ("big", ""): 0.7}


@dataclass(frozen=True)
class Case:
    id: str
    models: list[str]
    intent: str | None
    expected: list[float]
    params: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("known-pairs", ["big", "small"], "code", [0.9, 0.3]),
    Case("unknown-model", ["tiny"], "code", [0.5]),
    Case("unknown-class", ["big"], "chat", [0.5]),
    Case("no-intent-is-the-empty-class", ["big", "small"], None, [0.7, 0.5]),
    Case("own-default", ["tiny", "big"], "code", [0.2, 0.9], {"default": 0.2}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_score(case: Case) -> None:
    scorer = build(TYPE, **case.params)
    pool = [candidate(f"i{n}", model) for n, model in enumerate(case.models)]
    assert scorer.score(pool, context(intent=case.intent, quality=TABLE)) == pytest.approx(case.expected)


BAD = [BadParams("above-one", {"default": 1.5}, "default"), BadParams("negative", {"default": -0.1}, "default"),
       BadParams("unknown-key", {"prior": 0.5}, "prior")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


CFG = plugins_config([{"type": TYPE, "weight": 1.0, "parameters": {"default": 0.1}}],
                     sections={"models": {"big": {"quality": {"code": 0.9}}, "small": {"quality": {"code": 0.3}}}})


def test_the_router_records_the_step() -> None:
    ranked, trace = decide(healthy(), CFG, intent="code")  # the priors from models.<m>.quality
    assert ranked[2] == "small-a"
    assert_score_step(trace, "quality", TYPE, 1.0, {"big-a": 0.9, "big-b": 0.9, "small-a": 0.3})


def test_a_class_nobody_rated_scores_the_default() -> None:
    _, trace = decide(healthy(), CFG, intent="chat")
    assert_score_step(trace, "quality", TYPE, 1.0, {"big-a": 0.1, "big-b": 0.1, "small-a": 0.1})


def test_an_instance_with_its_own_estimate_scores_it_and_the_others_score_their_model() -> None:
    snap = QualitySnapshot({("big", "code"): 0.9, ("small", "code"): 0.3}, {("i0", "code"): 0.2, ("i2", "chat"): 0.1})
    pool = [candidate("i0", "big"), candidate("i1", "big"), candidate("i2", "small"), candidate("i3", "tiny")]
    ctx = replace(context(intent="code"), quality=snap)
    assert build(TYPE).score(pool, ctx) == pytest.approx([0.2, 0.9, 0.3, 0.5])


def test_the_router_ranks_a_divergent_instance_below_its_sibling() -> None:
    table = QualityTable({"big": ModelProfile(quality={"code": 0.9}), "small": ModelProfile(quality={"code": 0.3})})
    for n in range(40):  # big-a answers everything wrong, big-b 90% right
        table.update("big", "code", False, instance="big-a")
        table.update("big", "code", n % 10 != 0, instance="big-b")
    assert table.snapshot().is_divergent("big-a", "code") and table.get("big", "code") > 0.85
    ticks = count()
    router = build_router(CFG, perf=lambda: next(ticks) * 1e-6)
    ctx = replace(context(intent="code"), quality=table.snapshot())
    ranked = [t.id for t in router.decide(ctx, healthy()).targets]
    assert ranked[0] == "big-b" and ranked.index("big-a") > ranked.index("small-a")  # below even the small model
