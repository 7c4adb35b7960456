"""max-score-picker: the best total first, exact ties spread by mmh3(request_id:instance)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from router_core.framework import Scored
from tests.router_core.conftest import decide, healthy
from tests.router_core.plugin_kit import BadParams, assert_refused, build, plugins_config, step, tie_order

TYPE = "max-score-picker"


@dataclass(frozen=True)
class Case:
    id: str
    scored: list[Scored]
    order: list[str]
    how: str


TIES = "ties by mmh3(request_id:instance)"
CASES = [
    Case("best-first", [("a", 0.5), ("b", 0.9), ("c", 0.7)], ["b", "c", "a"], f"max score 0.900, margin 0.200; {TIES}"),
    Case("single", [("a", 0.3)], ["a"], "max score 0.300; the only feasible candidate"),  # no runner-up, no tie
    Case("empty", [], [], "nothing to pick"),
    Case("near-equal", [("a", 0.9), ("b", 0.89)], ["a", "b"], f"max score 0.900, margin 0.010; {TIES}"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pick(case: Case) -> None:
    picker = build(TYPE)
    assert picker.name == "max"
    picked = picker.pick("r1", case.scored)
    assert (picked.order, picked.how) == (case.order, case.how)


def test_exact_ties_follow_mmh3_and_spread_over_requests() -> None:
    picker, scored = build(TYPE), [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 0.5)]
    winners = set()
    for n in range(200):
        rid = f"req-{n}"
        order = picker.pick(rid, scored).order
        assert order == [*tie_order(rid, ["a", "b", "c"]), "d"]
        winners.add(order[0])
    assert winners == {"a", "b", "c"}


def test_near_equal_candidates_never_spread() -> None:
    picker, scored = build(TYPE), [("c", 0.88), ("a", 0.9), ("b", 0.89)]
    assert {tuple(picker.pick(f"req-{n}", scored).order) for n in range(200)} == {("a", "b", "c")}


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"margin": 0.1}, "margin"))


def test_the_router_records_the_pick_step() -> None:
    cfg = plugins_config([{"type": "kv-cache-scorer", "weight": 1.0}, {"type": TYPE, "name": "best"}])
    ranked, trace = decide(healthy(), cfg)  # 1 - KV: big-b .8, small-a .7, big-a .5
    assert ranked == ["big-b", "small-a", "big-a"]
    pick = step(trace, "pick")
    assert (pick.kind, pick.plugin, pick.instances, pick.value) == ("pick", "best/max-score-picker", ["big-b"], 0.8)
    assert pick.reason == f"max score 0.800, margin 0.100; {TIES}"
    assert pick.seq == len(trace.decision_trace) - 1


def test_a_deterministic_pick_records_no_chances() -> None:
    _, trace = decide(healthy())
    assert build(TYPE).pick("r1", [("a", 0.2), ("b", 0.1)]).probabilities is None
    assert trace.candidates and all(c.probability is None for c in trace.candidates)
