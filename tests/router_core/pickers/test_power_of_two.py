"""p2c-picker: sample two candidates with a request-seeded generator, keep the better; the rest best first."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pytest

from router_core.framework import Scored
from tests.router_core.conftest import decide, healthy, make_config
from tests.router_core.plugin_kit import BadParams, assert_refused, build, step, tie_order

TYPE = "p2c-picker"
THREE = [("c", 0.88), ("a", 0.9), ("b", 0.89)]
HOW = re.compile(r"^p2c: sampled (\S+) \((\S+)\) and (\S+) \((\S+)\), kept the better; seed mmh3\('(\S+)'\)$")


@dataclass(frozen=True)
class Case:
    id: str
    scored: list[Scored]
    order: list[str]


CASES = [  # fewer than two: nothing to sample, the max-score answer
    Case("empty", [], []),
    Case("single", [("a", 0.4)], ["a"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_pick_without_a_choice(case: Case) -> None:
    assert build(TYPE).pick("r1", case.scored).order == case.order


def test_two_candidates_always_keep_the_better() -> None:
    picker = build(TYPE)
    assert {tuple(picker.pick(f"req-{n}", [("b", 0.1), ("a", 0.2)]).order) for n in range(100)} == {("a", "b")}


@pytest.mark.parametrize("rid", [f"req-{n}" for n in range(40)])
def test_the_winner_is_the_better_of_the_two_sampled(rid: str) -> None:
    picked = build(TYPE).pick(rid, THREE)
    m = HOW.match(picked.how)
    assert m is not None, picked.how
    first, first_total, second, second_total, seed = m.groups()
    assert first != second and {first, second} <= {"a", "b", "c"} and seed == rid
    assert picked.order[0] == (first if float(first_total) > float(second_total) else second)
    ranked_rest = [iid for iid in ["a", "b", "c"] if iid != picked.order[0]]
    assert picked.order[1:] == ranked_rest


def test_same_request_same_order() -> None:
    picker = build(TYPE)
    assert len({(tuple(p.order), p.how) for p in (picker.pick("req-5", THREE) for _ in range(20))}) == 1


def test_requests_spread_over_the_better_two_never_the_worst() -> None:
    picker = build(TYPE)
    wins = Counter(picker.pick(f"req-{n}", THREE).order[0] for n in range(300))
    # pairs {a,b}, {a,c}, {b,c} equally likely: a wins 2/3, b 1/3, c never
    assert set(wins) == {"a", "b"} and 150 <= wins["a"] <= 250


def test_equal_candidates_spread_and_ties_keep_the_mmh3_order() -> None:
    picker, scored = build(TYPE), [("a", 1.0), ("b", 1.0), ("c", 1.0)]
    winners = Counter()
    for n in range(300):
        rid = f"req-{n}"
        picked = picker.pick(rid, scored)
        tied = tie_order(rid, ["a", "b", "c"])
        first, _, second, _, _ = HOW.match(picked.how).groups()  # type: ignore[union-attr]
        assert picked.order[0] == min(first, second, key=tied.index)  # equal totals: the earlier in tie order
        winners[picked.order[0]] += 1
    assert set(winners) == {"a", "b", "c"}


def test_bad_parameters() -> None:
    assert_refused(TYPE, BadParams("takes-no-parameters", {"k": 3}, "k"))


def test_router_picker_p2c_records_the_pick_step() -> None:
    _, trace = decide(healthy(), make_config(router={"picker": "p2c"}), request_id="req-3")
    pick = step(trace, "pick")
    assert pick.plugin == "p2c/p2c-picker" and HOW.match(pick.reason)
    (winner,) = pick.instances
    assert trace.selected_instance == winner
    assert pick.value == pytest.approx(next(c.total for c in trace.candidates if c.instance == winner))
    assert next(c.rank for c in trace.candidates if c.instance == winner) == 1


def test_each_candidate_s_chance_is_its_rank_s_and_the_trace_records_it() -> None:
    scored = [("c", 0.1), ("a", 0.9), ("b", 0.5), ("d", 0.3)]
    picked = build(TYPE).pick("req-1", scored)
    assert picked.probabilities == {"a": 0.5, "b": pytest.approx(1 / 3), "d": pytest.approx(1 / 6), "c": 0.0}
    assert picked.probability == picked.probabilities[picked.order[0]]
    _, trace = decide(healthy(), make_config(router={"picker": "p2c"}), request_id="req-3")
    chances = {c.instance: c.probability for c in trace.candidates if c.total is not None}
    assert sum(p or 0.0 for p in chances.values()) == pytest.approx(1.0)
    assert chances[trace.selected_instance or ""] == pytest.approx(trace.selection_probability)
