"""The margin to the runner-up, and the smallest single change that flips the winner, of every kind."""

from __future__ import annotations

import pytest

from app.ui.data import flip, scores, why
from router_core.pickers._tiebreak import rank
from schemas import DecisionTrace, InstanceSnapshot
from schemas.trace_policy import ClauseTried, PolicyStep
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases
from tests.router_core.conftest import decide, healthy
from tests.router_core.decide.test_router_rules import CONFIG, route

MORE = "(other atoms failed too)"


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
    assert ("challenger", "kv-cache") not in {(c.side, c.term) for c in changes}
    assert ("challenger", "queue-depth") in {(c.side, c.term) for c in changes}
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


def test_any_ranked_candidate_may_flip_not_only_the_runner_up() -> None:
    # leader 0.5 (factor 0.5, terms saturated), runner-up 0.44 (saturated: cannot rise), third 0.4 with room:
    # lowering the leader to 0.44 takes 0.06 / 0.25 = 0.24; raising the third's latency to tie takes 0.1 / 0.5 = 0.2
    lead = cases.cand("a", [1.0, 1.0], 1, factor=0.5)
    second = cases.cand("b", [1.0, 1.0], 2, factor=0.44)
    third = cases.cand("c", [0.3, 0.5], 3)
    trace = cases.normal_win().model_copy(update={"candidates": [lead, second, third], "selected_instance": "a"})
    best = flip.smallest_flip(trace)
    assert best is not None
    assert (best.kind, best.side, best.instance, best.term) == ("term", "challenger", "c", "latency")
    assert (best.raw, best.new_raw, best.new_winner) == (0.5, pytest.approx(0.7), "c")
    assert best.size == pytest.approx(0.2)
    lowering = next(f for f in flip.flip_changes(trace) if f.side == "winner")
    assert lowering.size == pytest.approx(0.24) and lowering.new_winner == "b"
    assert not any(f.instance == "b" for f in flip.flip_changes(trace))  # saturated: a raw above 1 is impossible


def removed_but_strong(**update: object) -> DecisionTrace:
    """normal_win with the removed candidate's would-be terms recorded: [0.9, 0.9], total 0.9 > 0.54."""
    trace = cases.normal_win()
    cands = [c.model_copy(update={"score_terms": [0.9, 0.9], **update}) if not c.feasible else c
             for c in trace.candidates]
    return trace.model_copy(update={"candidates": cands})


def test_a_removed_candidate_crossing_its_threshold_would_lead_on_its_would_be_terms() -> None:
    best = flip.smallest_flip(removed_but_strong())
    assert best is not None and (best.kind, best.side, best.instance, best.term) == (
        "feasibility", "challenger", "v4-32k-a", "kv-cache")
    assert (best.raw, best.new_raw, best.metric) == (0.91, 0.85, "kv_cache_usage")
    assert best.size == pytest.approx(0.06 / 0.91)  # smaller than any term's 0.08
    assert "would have kept it" in (why.flip_sentence(removed_but_strong()) or "")
    weak = removed_but_strong(score_terms=[0.5, 0.5])  # 0.5 < 0.54: feasible, it would still lose
    two = removed_but_strong(violations=[cases.KV, cases.KV.model_copy(update={"constraint": "queue"})])
    for trace in (weak, two, cases.normal_win()):  # and without would-be terms at all
        assert not any(f.kind == "feasibility" and f.side == "challenger" for f in flip.flip_changes(trace))


def test_the_leader_crossing_a_threshold_another_candidate_broke() -> None:
    trace = cases.normal_win()
    state = InstanceSnapshot(instance="coder-6b-b", model="coder-6b", kv_cache_usage=0.84)
    cands = [c.model_copy(update={"state": state}) if c.instance == "coder-6b-b" else c for c in trace.candidates]
    best = flip.smallest_flip(trace.model_copy(update={"candidates": cands}))
    assert best is not None and (best.kind, best.side, best.instance, best.new_winner) == (
        "feasibility", "winner", "coder-6b-b", "coder-6b-a")
    assert (best.raw, best.new_raw) == (0.84, 0.85) and best.size == pytest.approx(0.01 / 0.85)
    past = state.model_copy(update={"kv_cache_usage": 0.9})  # already past it (held in by a latch): no crossing
    cands = [c.model_copy(update={"state": past}) if c.instance == "coder-6b-b" else c for c in trace.candidates]
    assert not any(f.kind == "feasibility" for f in flip.flip_changes(trace.model_copy(update={"candidates": cands})))


def with_tried(trace: DecisionTrace, *tried: ClauseTried, rule: str = "default") -> DecisionTrace:
    step = PolicyStep(policy="p.yaml sha256:1", rule=rule, tried=[*tried, ClauseTried(rule=rule, matched=True)])
    return trace.model_copy(update={"policy": step, "rule": rule})


def test_a_rule_one_atom_away() -> None:
    hour = ClauseTried(rule="urgent", matched=False, detail=["request_time.hour = 17 not in [9, 11, 14, 16]"])
    two = ClauseTried(rule="legal", matched=False, detail=['intent = "chat" != "legal"', MORE])
    trace = with_tried(cases.normal_win(), two, hour)
    best = flip.smallest_flip(trace)
    assert best is not None and (best.kind, best.term, best.metric, best.raw, best.new_raw) == (
        "rule", "urgent", "request_time.hour", "17", "16")
    assert best.size == pytest.approx(1 / 24)  # smaller than the 0.08 of a term
    assert [f.term for f in flip.flip_changes(trace) if f.kind == "rule"] == ["urgent"]  # legal failed on two
    assert why.flip_sentence(trace) == ("Had request_time.hour been 16, rule urgent would have matched instead of "
                                        "default: the smallest single change.")


def test_a_decided_trace_that_no_rule_matched() -> None:
    _, trace = decide(healthy(), CONFIG, route=route(tokens=100))
    rules = {f.term: f for f in flip.flip_changes(trace) if f.kind == "rule"}
    assert set(rules) == {"to-small", "roomy", "slots", "costly"}
    assert (rules["to-small"].metric, rules["to-small"].new_raw) == ("input_length", "1001")
    assert rules["to-small"].size == pytest.approx(901 / 1001)
    assert rules["roomy"].new_raw == "matched prompt_contains('roomy')" and rules["roomy"].size == 1.0


def test_a_sampling_picker_flips_the_most_likely_not_a_clamped_tie() -> None:
    # softmax drew coder-6b-a (rank 1 in the attempt order) though coder-6b-b scored higher
    drawn = cases.cand("coder-6b-a", [0.5, 0.5], 1).model_copy(update={"probability": 0.4})
    likely = cases.cand("coder-6b-b", [0.5, 0.58], 2).model_copy(update={"probability": 0.6})
    trace = cases.normal_win().model_copy(update={"candidates": [drawn, likely], "selected_instance": "coder-6b-a",
                                                  "selection_probability": 0.4})
    m = flip.margin(trace)
    assert m is not None and m.winner.instance == "coder-6b-b" and m.margin == pytest.approx(0.04)
    best = flip.smallest_flip(trace)
    assert best is not None and best.likeliest and best.size == pytest.approx(0.08)
    text = why.flip_sentence(trace) or ""
    assert "the most likely draw" in text and "tied" not in text


def test_the_flip_sentence_for_a_term_keeps_its_words() -> None:
    text = why.flip_sentence(stub.sample_trace()) or ""
    assert text == (f"Margin 0.132 to {stub.SELECTED_INSTANCE}. Lowering {stub.TOP_RANKED}'s kv-cache from 0.58 to "
                    f"0.25 (by 0.33, weight 0.4) would have tied the totals, and the tie-break (mmh3 of "
                    f"request_id:instance) would have gone to {stub.SELECTED_INSTANCE}: the smallest single change.")
    assert why.flip_sentence(cases.tie_break()) == "coder-6b-b and coder-6b-a tied: the smallest change to any term " \
                                                   "flips them."


def first_on_a_tie(request_id: str, *instances: str) -> str:
    """The router's own tie-break: whom its pickers' ranking puts first among equal totals."""
    return rank(request_id, [(i, 0.5) for i in instances])[0][0]


def ids_where(lead: str, other: str, first: str) -> str:
    """A request id on which the router's tie-break between ``lead`` and ``other`` goes to ``first``."""
    return next(r for r in (f"req-{n}" for n in range(64)) if first_on_a_tie(r, lead, other) == first)


def test_the_app_breaks_a_tie_as_the_router_does() -> None:
    for n in range(200):
        names = [f"inst-{(n * 7 + k) % 11}" for k in range(1 + n % 4)]
        assert scores.tie_break(f"req-{n}", names) == first_on_a_tie(f"req-{n}", *names)


def test_a_change_that_only_ties_says_where_the_tie_break_goes_or_that_it_must_go_past() -> None:
    """The audit: 'would have tied the totals' for 'the smallest change that would have changed the winner'
    (docs/operators.md); a tie goes to the tie-break, which may keep the leader."""
    lead, run = stub.TOP_RANKED, stub.SELECTED_INSTANCE  # lowering lead's kv-cache to 0.25 ties them
    head = f"Margin 0.132 to {run}. Lowering {lead}'s kv-cache from 0.58 to"
    goes = stub.sample_trace().model_copy(update={"request_id": ids_where(lead, run, run)})
    best = flip.smallest_flip(goes)
    assert best is not None and best.at_tie == run
    assert why.flip_sentence(goes) == (f"{head} 0.25 (by 0.33, weight 0.4) would have tied the totals, and the "
                                       f"tie-break (mmh3 of request_id:instance) would have gone to {run}: the "
                                       "smallest single change.")
    keeps = stub.sample_trace().model_copy(update={"request_id": ids_where(lead, run, lead)})
    best = flip.smallest_flip(keeps)
    assert best is not None and best.at_tie == lead
    assert why.flip_sentence(keeps) == (f"{head} below 0.25 (by more than 0.33, weight 0.4) would have made {run} win: "
                                        "the smallest single change. At 0.25 the totals would have tied, and the "
                                        f"tie-break (mmh3 of request_id:instance) would have kept {lead}.")


def test_a_tie_at_the_end_of_a_term_s_range_that_the_leader_keeps_is_no_change_of_the_winner() -> None:
    # b (0.5) ties a (0.75) only with a term at 1.0 (0.5 + 0.5 * 0.5): past it there is no room
    a, b = cases.cand("a", [0.75, 0.75], 1), cases.cand("b", [0.5, 0.5], 2)
    trace = cases.normal_win().model_copy(update={"candidates": [a, b], "selected_instance": "a"})
    keeps = trace.model_copy(update={"request_id": ids_where("a", "b", "a")})
    gives = trace.model_copy(update={"request_id": ids_where("a", "b", "b")})
    raised = [f for f in flip.flip_changes(gives) if f.side == "challenger"]
    assert [(f.term, f.new_raw, f.at_tie) for f in raised] == [("latency", pytest.approx(1.0), "b"),
                                                               ("queue", pytest.approx(1.0), "b")]
    assert not [f for f in flip.flip_changes(keeps) if f.side == "challenger"]
    assert all(f.side == "winner" and f.at_tie == "a" for f in flip.flip_changes(keeps))
