"""softmax-picker: sample with weight exp((total - best) / temperature), seeded by the request id."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import pytest

from router_core.framework import Scored
from tests.router_core.conftest import decide, healthy, make_config
from tests.router_core.plugin_kit import BadParams, assert_refused, build, plugins_config, step

TYPE = "softmax-picker"
RIDS = [f"req-{n}" for n in range(400)]


def wins(temperature: float, scored: list[Scored]) -> Counter[str]:
    picker = build(TYPE, temperature=temperature)
    return Counter(picker.pick(rid, scored).order[0] for rid in RIDS)


@dataclass(frozen=True)
class Case:
    id: str
    temperature: float
    scored: list[Scored]
    share: dict[str, tuple[int, int]]  # instance -> (min, max) wins out of 400 requests


CASES = [
    Case("cold-is-max-score", 1e-4, [("b", 0.8), ("a", 0.9)], {"a": (400, 400)}),
    # weights 1 : 1/3 -> a wins 3/4
    Case("three-to-one", 0.05, [("a", 0.9), ("b", 0.9 - 0.05 * math.log(3))], {"a": (250, 350), "b": (50, 150)}),
    Case("hot-is-near-uniform", 100.0, [("a", 0.9), ("b", 0.89), ("c", 0.88)],
         {"a": (90, 180), "b": (90, 180), "c": (90, 180)}),
    Case("equal-candidates-spread", 0.05, [("a", 1.0), ("b", 1.0)], {"a": (150, 250), "b": (150, 250)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_share_of_wins(case: Case) -> None:
    got = wins(case.temperature, case.scored)
    assert set(got) == set(case.share)
    for iid, (low, high) in case.share.items():
        assert low <= got[iid] <= high, (iid, got)


def test_the_rest_follow_best_first_and_how_says_so() -> None:
    picked = build(TYPE, temperature=0.5).pick("req-1", [("c", 0.1), ("a", 0.9), ("b", 0.5)])
    winner = picked.order[0]
    assert picked.order[1:] == [iid for iid in ["a", "b", "c"] if iid != winner]
    total = {"a": 0.9, "b": 0.5, "c": 0.1}[winner]
    assert picked.how == f"softmax T=0.5: sampled {winner} ({total:.3f}) of 3; seed mmh3('req-1')"


def test_same_request_same_order() -> None:
    picker, scored = build(TYPE, temperature=1.0), [("a", 0.9), ("b", 0.89), ("c", 0.88)]
    assert len({tuple(picker.pick("req-5", scored).order) for _ in range(20)}) == 1


def test_fewer_than_two_is_the_max_score_answer() -> None:
    picker = build(TYPE)
    assert picker.pick("r1", []).order == [] and picker.pick("r1", [("a", 0.3)]).order == ["a"]
    assert picker.params.temperature == 0.05


BAD = [BadParams("negative", {"temperature": -1}, "temperature"), BadParams("zero", {"temperature": 0}, "temperature"),
       BadParams("unknown-key", {"temp": 0.1}, "temp")]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_bad_parameters(case: BadParams) -> None:
    assert_refused(TYPE, case)


def test_router_softmax_temperature_is_the_derived_parameter() -> None:
    _, trace = decide(healthy(), make_config(router={"picker": "softmax", "softmax_temperature": 0.2}))
    pick = step(trace, "pick")
    assert pick.plugin == "softmax/softmax-picker" and pick.reason.startswith("softmax T=0.2: sampled ")
    assert pick.instances == [trace.selected_instance]


def test_a_named_picker_in_router_plugins() -> None:
    cfg = plugins_config([{"type": "kv-cache-scorer", "weight": 1.0},
                          {"type": TYPE, "name": "spread", "parameters": {"temperature": 1e-4}}])
    ranked, trace = decide(healthy(), cfg)
    assert ranked == ["big-b", "small-a", "big-a"]  # this cold it is max-score
    pick = step(trace, "pick")
    assert (pick.plugin, pick.instances, pick.value) == ("spread/softmax-picker", ["big-b"], 0.8)
    assert pick.reason == "softmax T=0.0001: sampled big-b (0.800) of 3; seed mmh3('r1')"


def test_each_candidate_s_chance_is_exp_total_over_t_normalised_and_the_trace_records_it() -> None:
    scored = [("c", 0.1), ("a", 0.9), ("b", 0.5)]
    picked = build(TYPE, temperature=0.5).pick("req-1", scored)
    weights = {iid: math.exp((t - 0.9) / 0.5) for iid, t in scored}
    assert picked.probabilities is not None and set(picked.probabilities) == {"a", "b", "c"}
    for iid, w in weights.items():
        assert picked.probabilities[iid] == pytest.approx(w / sum(weights.values()))
    assert picked.probability == picked.probabilities[picked.order[0]]
    _, trace = decide(healthy(), make_config(router={"picker": "softmax", "softmax_temperature": 0.2}))
    ranked = [c for c in trace.candidates if c.total is not None]
    assert len(ranked) >= 2 and sum(c.probability or 0.0 for c in ranked) == pytest.approx(1.0)
    chosen = next(c for c in trace.candidates if c.instance == trace.selected_instance)
    assert chosen.probability == pytest.approx(trace.selection_probability)
    assert all(c.probability is None for c in trace.candidates if c.total is None)
