"""The decision diff's opening line: what made A and B differ, for each kind of cause."""

from __future__ import annotations

from datetime import UTC, datetime

from app.ui.data.diff_verdict import diff_verdict
from router_core.rules.load import compile_policy
from router_core.rules.request import RequestView
from router_core.rules.route import RouteChoice
from schemas import Attempt, AttemptStatus, DecisionTrace
from schemas.trace_policy import PolicyStep
from tests.app.ui.data import why_cases as cases
from tests.router_core.conftest import decide, healthy
from tests.router_core.decide.test_router_rules import CONFIG, route


def changed(trace: DecisionTrace, instance: str, **update: object) -> DecisionTrace:
    cands = [c.model_copy(update=update) if c.instance == instance else c for c in trace.candidates]
    return trace.model_copy(update={"candidates": cands})


def test_the_same_choice_says_so() -> None:
    a = cases.normal_win()
    assert diff_verdict(a, a) == "A and B chose the same instance, coder-6b-b."
    b = a.model_copy(update={"experiment_arm": "B"})
    assert diff_verdict(a, b) == "A and B chose the same instance, coder-6b-b (another experiment arm (— vs B))."


def test_another_rule_with_the_atom_that_failed_it() -> None:
    _, a = decide(healthy(), CONFIG, route=route(tokens=2000))
    _, b = decide(healthy(), CONFIG, route=route(tokens=100))
    assert diff_verdict(a, b) == (
        f"A chose small-a, B chose {b.selected_instance}: another rule: A matched to-small (target small), "
        "B matched no rule (in B, to-small failed on input_length = 100 <= 1000).")


def test_a_constraint_verdict_in_b() -> None:
    a = cases.normal_win()
    b = changed(a, "coder-6b-b", feasible=False, violations=[cases.KV], total=None, rank=None)
    b = changed(b, "coder-6b-a", rank=1).model_copy(update={"selected_instance": "coder-6b-a"})
    assert diff_verdict(a, b) == ("A chose coder-6b-b, B chose coder-6b-a: a constraint verdict: in B, coder-6b-b: "
                                  "removed by kv-cache 91% > 85% since 10:02:03.")
    assert diff_verdict(b, a).endswith("a constraint verdict: in A, coder-6b-b: removed by kv-cache 91% > 85% "
                                       "since 10:02:03.")


def test_a_score_term_that_moved_the_gap() -> None:
    a = cases.normal_win()  # coder-6b-b led coder-6b-a by 0.04, all on latency
    b = changed(a, "coder-6b-b", score_terms=[0.5, 0.4], total=0.45, rank=2)
    b = changed(b, "coder-6b-a", rank=1).model_copy(update={"selected_instance": "coder-6b-a",
                                                            "policy_hash": "sha256:b"})
    assert diff_verdict(a, b) == (
        "A chose coder-6b-b, B chose coder-6b-a: another policy (sha256:0123456789abcdef vs sha256:b); "
        "a score term: latency moved 0.09 towards coder-6b-a (coder-6b-b led by 0.04 in A, by -0.05 in B).")


def test_the_picker_s_draw() -> None:
    a = cases.normal_win()
    b = changed(changed(a, "coder-6b-b", probability=0.6), "coder-6b-a", probability=0.4)
    b = b.model_copy(update={"selected_instance": "coder-6b-a", "selection_probability": 0.4})
    assert diff_verdict(a, b) == ("A chose coder-6b-b, B chose coder-6b-a: the picker's draw: in B, coder-6b-b: not "
                                  "drawn by the sampling picker: it had probability 60%; it drew coder-6b-a (drawn "
                                  "with 40%).")


def test_a_failed_attempt_and_a_tie_break() -> None:
    a = cases.normal_win()
    failed = [Attempt(seq=0, instance="coder-6b-b", model="coder-6b", status=AttemptStatus.TIMEOUT, latency_ms=9.0)]
    b = a.model_copy(update={"selected_instance": "coder-6b-a", "attempts": failed, "fallback_triggered": True})
    assert "a failed attempt: in B, coder-6b-b: picked first, but its attempt failed (timeout)" in diff_verdict(a, b)
    tie = cases.tie_break()
    flipped = tie.model_copy(update={"selected_instance": "coder-6b-a"})
    assert "the tie-break: in B, coder-6b-b: lost the tie-break to coder-6b-a" in diff_verdict(tie, flipped)


def test_a_request_its_rules_throttle_refused() -> None:
    """Nothing chosen in B because the rule's throttle refused it: not 'no feasible instance' (found by an audit)."""
    step = PolicyStep(policy="p.yaml sha256:x", rule="to-coder", target="coder-6b")
    a = cases.normal_win().model_copy(update={"rule": "to-coder", "policy": step})
    b = a.model_copy(update={"candidates": [], "selected_model": None, "selected_instance": None, "attempts": [],
                             "policy": step.model_copy(update={"throttled": "reject"})})
    assert diff_verdict(a, b) == ("A chose coder-6b-b, B chose no instance: nothing was chosen in B "
                                  "(rule to-coder's throttle was empty: refused with 429).")
    waited = b.model_copy(update={"policy": step.model_copy(update={"throttled": "reject", "waited_s": 0.7})})
    assert diff_verdict(a, waited) == ("A chose coder-6b-b, B chose no instance: nothing was chosen in B "
                                       "(rule to-coder's throttle was empty: refused with 429 after waiting 0.7 s).")


OR_POLICY = compile_policy("routing_matrix:\n  - {rule_name: long, condition: \"input_length > 1000 || "
                           "prompt_contains('long')\", primary_target: small}\n", "p.yaml", CONFIG)


def or_route(tokens: int) -> RouteChoice:
    view = RequestView(input_length=tokens, query_length=tokens, language="en", intent=None, intent_confidence=None,
                       file_types=(), has_attachments=False, request_time=datetime(2026, 11, 29, 15, tzinfo=UTC),
                       prompt="short")
    return RouteChoice(OR_POLICY, OR_POLICY.match(view), local_hour=15)


def test_no_rule_matched_is_no_rule_and_both_failed_atoms_of_an_or_are_owned() -> None:
    """The audit: 'B matched auto (in B, long_context_priority failed on input_length = 18 <= 8000)': auto is no
    rule, and the other atom of the OR failed too (as the rules table and ``routelens trace`` say)."""
    _, a = decide(healthy(), CONFIG, route=or_route(2000))
    _, b = decide(healthy(), CONFIG, route=or_route(18))
    assert b.rule == "auto" and b.policy is not None and b.policy.rule is None
    assert diff_verdict(a, b) == (
        f"A chose small-a, B chose {b.selected_instance}: another rule: A matched long (target small), "
        "B matched no rule (in B, long failed on input_length = 18 <= 1000; other atoms failed too).")
    assert diff_verdict(b, a).startswith(f"A chose {b.selected_instance}, B chose small-a: another rule: A matched "
                                         "no rule, B matched long (target small) (in A, long failed on")
    named = b.model_copy(update={"rule": "model:big"})
    assert "B matched no rule (the request named big) (in B, long" in diff_verdict(a, named)
