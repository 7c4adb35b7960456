"""The margin to the runner-up and the smallest one-term change that flips the winner."""

from __future__ import annotations

import pytest

from app.ui.data import flip
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases


def test_margin_and_deciding_term_of_the_sample() -> None:
    m = flip.margin(stub.sample_trace())
    assert m is not None
    assert (m.winner.instance, m.runner_up.instance) == (stub.TOP_RANKED, stub.SELECTED_INSTANCE)
    assert m.margin == pytest.approx(0.132)
    assert m.deciding_term == "queue-depth"  # 0.27 - 0.15 is the biggest share of the margin


def test_smallest_flip_is_the_feasible_one_with_the_least_change() -> None:
    # margin 0.132: winner kv-cache -0.33 (weight 0.4) beats every 0.3-weight change (0.44);
    # raising the runner-up's kv-cache by 0.33 would need 1.03 > 1, so it is not offered.
    changes = flip.flip_changes(stub.sample_trace())
    best = changes[0]
    assert (best.side, best.term, best.instance) == ("winner", "kv-cache", stub.TOP_RANKED)
    assert best.raw == 0.58 and best.new_raw == pytest.approx(0.25)
    assert best.delta == pytest.approx(0.33)
    assert ("runner-up", "kv-cache") not in {(c.side, c.term) for c in changes}
    assert ("runner-up", "queue-depth") in {(c.side, c.term) for c in changes}
    assert flip.smallest_flip(stub.sample_trace()) == best
    assert [c.delta for c in changes] == sorted(c.delta for c in changes)


def test_weight_factor_scales_the_needed_change() -> None:
    trace = cases.normal_win()
    win = next(c for c in trace.candidates if c.rank == 1)
    halved = [c.model_copy(update={"weight_factor": 0.5, "total": None}) if c is win else c
              for c in trace.candidates]
    slow = trace.model_copy(update={"candidates": halved})
    # total 0.5*0.54 = 0.27 vs 0.5: the half-weighted winner is now behind; recomputed from terms
    assert flip.total_of(slow, halved[1]) == pytest.approx(0.27)


def test_flip_on_the_normal_win() -> None:
    best = flip.smallest_flip(cases.normal_win())
    assert best is not None
    assert best.term in {"queue", "latency"} and best.delta == pytest.approx(0.08)  # 0.04 / 0.5


def test_tie_needs_no_change_and_lone_candidates_have_no_margin() -> None:
    best = flip.smallest_flip(cases.tie_break())
    assert best is not None and best.delta == pytest.approx(0.0)
    assert flip.margin(cases.no_feasible()) is None
    assert flip.flip_changes(cases.unknown_model()) == []


def test_no_single_term_can_flip() -> None:
    trace = cases.normal_win()
    far = [c.model_copy(update={"score_terms": [1.0, 1.0], "total": 1.0}) if c.rank == 1 else
           c.model_copy(update={"score_terms": [0.0, 0.0], "total": 0.0}) if c.rank == 2 else c
           for c in trace.candidates]
    assert flip.smallest_flip(trace.model_copy(update={"candidates": far})) is None  # needs 2.0 on one term
