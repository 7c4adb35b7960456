"""pickers/_tiebreak.py: best first, exact ties by mmh3(request_id:instance); the request-seeded generator."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

import pytest

from router_core.framework import Scored
from router_core.pickers._tiebreak import best_first, rank, rng_for, with_first
from tests.router_core.plugin_kit import tie_order


@dataclass(frozen=True)
class Case:
    id: str
    scored: list[Scored]
    request_id: str
    groups: list[list[str]]  # instance ids best first; one inner list per group of exactly equal totals


CASES = [
    Case("distinct", [("a", 0.5), ("b", 0.9), ("c", 0.7)], "r1", [["b"], ["c"], ["a"]]),
    Case("all-equal", [("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)], "r1", [["a", "b", "c", "d"]]),
    Case("tie-at-the-top", [("c", 0.2), ("a", 0.8), ("b", 0.8)], "req-7", [["a", "b"], ["c"]]),
    Case("tie-at-the-bottom", [("a", 0.1), ("b", 0.9), ("c", 0.1)], "r2", [["b"], ["a", "c"]]),
    Case("near-equal-is-not-a-tie", [("a", 0.5), ("b", 0.5 + 1e-12)], "r1", [["b"], ["a"]]),
    Case("negative-and-zero", [("a", -1.0), ("b", 0.0)], "r1", [["b"], ["a"]]),
    Case("empty", [], "r1", []),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_rank(case: Case) -> None:
    expected = [iid for group in case.groups for iid in tie_order(case.request_id, group)]
    totals = dict(case.scored)
    assert rank(case.request_id, case.scored) == [(iid, totals[iid]) for iid in expected]


def test_the_input_order_does_not_matter() -> None:
    scored = [("a", 1.0), ("b", 1.0), ("c", 0.5), ("d", 1.0)]
    assert len({tuple(rank("r9", list(p))) for p in permutations(scored)}) == 1


def test_different_requests_break_ties_differently() -> None:
    scored = [(f"i{n}", 1.0) for n in range(4)]
    firsts = {rank(f"req-{n}", scored)[0][0] for n in range(100)}
    assert firsts == {"i0", "i1", "i2", "i3"}


def test_with_first() -> None:
    ranked = [("a", 0.9), ("b", 0.8), ("c", 0.7)]
    assert with_first("b", ranked) == ["b", "a", "c"]
    assert with_first("a", ranked) == ["a", "b", "c"]
    assert with_first("c", ranked) == ["c", "a", "b"]


def test_best_first() -> None:
    assert best_first([]).order == [] and best_first([]).how == "nothing to pick"
    one = best_first([("a", 0.25)])
    assert one.order == ["a"] and one.how == "max score 0.250; the only feasible candidate"  # no margin, no tie
    two = best_first([("a", 0.9), ("b", 0.65), ("c", 0.1)])
    assert two.order == ["a", "b", "c"]
    assert two.how == "max score 0.900, margin 0.250; ties by mmh3(request_id:instance)"


def test_rng_for_is_seeded_by_the_request_id_alone() -> None:
    draws = [rng_for("r1").random() for _ in range(2)]
    assert draws[0] == draws[1]
    assert rng_for("r1").random() != rng_for("r2").random()
