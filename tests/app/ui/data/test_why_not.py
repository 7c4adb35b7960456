"""One reason for every candidate not chosen, for each kind of reason, on hand-built and decided traces."""

from __future__ import annotations

import pytest

from app.ui.data.why_not import reason_for, reasons, reasons_rows
from schemas import AttemptStatus, CandidateEval, DecisionStep, DecisionTrace, StepKind, Violation
from schemas.common import RoutingMode
from schemas.trace_policy import PolicyStep
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases
from tests.router_core.conftest import decide, healthy, make_config
from tests.router_core.decide.test_router_rules import CONFIG, route

SOFT = Violation(constraint="queue", metric="queue", op="<=", value=9.0, threshold=8.0, reason="ramp",
                 severity="soft", score_factor=0.5)


def with_cands(trace: DecisionTrace, *cands: CandidateEval, **update: object) -> DecisionTrace:
    return trace.model_copy(update={"candidates": list(cands), **update})


def test_outscored_names_the_term_that_made_most_of_the_gap_and_by_how_much() -> None:
    got = reasons(cases.normal_win())["coder-6b-a"]
    # totals 0.5 vs 0.54: queue 0.5 on both, latency 0.5 * (0.58 - 0.5) = 0.04
    assert (got.kind, got.term, got.amount) == ("outscored", "latency", pytest.approx(0.04))
    assert got.text == "outscored by coder-6b-b on latency by 0.04 (0.5 vs 0.54)"
    swapped = [cases.cand("coder-6b-a", [0.2, 0.58], 2), cases.cand("coder-6b-b", [0.5, 0.58], 1)]
    assert reasons(with_cands(cases.normal_win(), *swapped))["coder-6b-a"].term == "queue"


def test_a_soft_constraint_s_scaling_is_said_with_the_term() -> None:
    slow = cases.cand("coder-6b-a", [0.5, 0.5], 2, factor=0.5).model_copy(update={"violations": [SOFT]})
    got = reasons(with_cands(cases.normal_win(), slow, cases.cand("coder-6b-b", [0.5, 0.58], 1)))["coder-6b-a"]
    assert got.kind == "outscored" and got.text.endswith("; its total was scaled ×0.5 by queue")
    assert got.amount == pytest.approx(0.5 * (0.58 - 0.5 * 0.5))  # latency: 0.29 - 0.125 beats queue's 0.125


def test_removed_by_the_first_hard_constraint_at_its_value() -> None:
    got = reasons(cases.normal_win())["v4-32k-a"]
    assert (got.kind, got.term, got.amount) == ("constraint", "kv-cache", 0.91)
    assert got.text == "removed by kv-cache 91% > 85% since 10:02:03"


def test_lost_the_tie_break() -> None:
    got = reasons(cases.tie_break())["coder-6b-a"]
    assert got.kind == "tie" and got.text.startswith("lost the tie-break to coder-6b-b: both scored 0.5")


def test_the_first_pick_whose_attempt_failed() -> None:
    got = reasons(stub.sample_trace())
    assert got[stub.TOP_RANKED].kind == "attempt"
    assert got[stub.TOP_RANKED].text == f"picked first, but its attempt failed (timeout, ReadTimeout); " \
                                        f"{stub.SELECTED_INSTANCE} served"
    assert got[stub.REJECTED_INSTANCE].kind == "constraint" and stub.SELECTED_INSTANCE not in got


def test_not_drawn_by_a_sampling_picker_with_its_probability() -> None:
    lead = cases.cand("coder-6b-b", [0.5, 0.58], 2).model_copy(update={"probability": 0.62})
    drawn = cases.cand("coder-6b-a", [0.5, 0.5], 1).model_copy(update={"probability": 0.38})
    never = cases.cand("coder-6b-c", [0.1, 0.1], 3).model_copy(update={"probability": 0.0})
    trace = with_cands(cases.normal_win(), lead, drawn, never, selected_instance="coder-6b-a",
                       selection_probability=0.38)
    got = reasons(trace)
    assert (got["coder-6b-b"].kind, got["coder-6b-b"].amount) == ("draw", 0.62)
    assert got["coder-6b-b"].text == "not drawn by the sampling picker: it had probability 62%; it drew coder-6b-a " \
                                     "(drawn with 38%)"
    assert got["coder-6b-c"].kind == "outscored"  # a chance of 0 is no draw: it could not win


def test_a_real_softmax_decision_gives_every_loser_its_chance() -> None:
    _, trace = decide(healthy(), make_config(router={"picker": "softmax", "softmax_temperature": 0.5}))
    got = reasons(trace)
    losers = [c for c in trace.candidates if c.instance != trace.selected_instance]
    assert losers and all(got[c.instance].kind == "draw" for c in losers)
    assert all(f"{c.probability:.0%}" in got[c.instance].text for c in losers if (c.probability or 0) >= 0.01)


def test_a_rule_s_chain_is_left_out_by_its_target_present_or_absent() -> None:
    _, trace = decide(healthy(), CONFIG, route=route(tokens=2000))  # rule to-small: small, then big
    got = reasons(trace)
    assert {i: r.kind for i, r in got.items()} == {"big-a": "target", "big-b": "target"}
    assert got["big-b"].text == "left out by rule to-small's target small: big is on its chain, tried only after small"
    assert reason_for(trace, "small-a") is None  # it was chosen
    absent = reason_for(trace, "tiny-a", "tiny")
    assert absent is not None and absent.kind == "target"
    assert absent.text == "left out by rule to-small's target small (chain big → canned)"


def test_absent_without_a_rule_is_not_a_candidate() -> None:
    named = cases.normal_win().model_copy(update={"features": cases.normal_win().features.model_copy(
        update={"requested_model": "coder-6b"})})
    assert reason_for(named, "v4-b", "v4-32k").text == "not an instance of the requested model coder-6b"  # type: ignore[union-attr]
    assert reason_for(cases.normal_win(), "zz", None).kind == "absent"  # type: ignore[union-attr]


def test_a_session_s_binding_and_the_static_mode() -> None:
    bound = DecisionStep(seq=0, step="affinity", kind=StepKind.PICK, reason="session kept on coder-6b-a",
                         instances=["coder-6b-a"])
    trace = cases.normal_win().model_copy(update={"selected_instance": "coder-6b-a", "decision_trace": [bound]})
    got = reasons(trace)["coder-6b-b"]
    assert got.kind == "affinity" and got.text.endswith("bound to coder-6b-a (session kept on coder-6b-a)")
    static = cases.tie_break().model_copy(update={"mode": RoutingMode.STATIC})
    assert reasons(static)["coder-6b-a"].kind == "order"


def test_failing_open_judges_by_score_not_by_the_constraint_everyone_broke() -> None:
    a = cases.cand("v4-32k-a", [0.2, 0.2], 2).model_copy(update={"feasible": False, "violations": [cases.KV]})
    b = cases.cand("v4-32k-b", [0.9, 0.9], 1).model_copy(update={"feasible": False, "violations": [cases.KV]})
    trace = with_cands(cases.fail_open(), a, b, selected_instance="v4-32k-b")
    assert reasons(trace)["v4-32k-a"].kind == "outscored"


def test_rows_for_the_page_best_placed_first() -> None:
    rows = reasons_rows(cases.normal_win())
    assert [r["instance"] for r in rows] == ["coder-6b-a", "v4-32k-a"]
    assert set(rows[0]) == {"instance", "model", "why not"}


def test_a_policy_step_without_a_target_never_blames_a_target() -> None:
    step = PolicyStep(policy="p.yaml sha256:1", rule="any", target=None)
    trace = cases.normal_win().model_copy(update={"policy": step})
    assert reasons(trace)["coder-6b-a"].kind == "outscored"
    assert reason_for(trace, "zz", "m").kind == "absent"  # type: ignore[union-attr]


def test_a_failed_attempt_is_only_a_reason_for_the_instance_that_failed() -> None:
    t = stub.sample_trace()
    ok = [a.model_copy(update={"status": AttemptStatus.OK}) for a in t.attempts]
    got = reasons(t.model_copy(update={"attempts": ok}))[stub.TOP_RANKED]
    assert (got.kind, got.text) == ("order", f"ranked 1 in the attempt order; {stub.SELECTED_INSTANCE} was chosen")
