"""The decision sentence, on the five shapes a decision takes."""

from __future__ import annotations

from app.ui.data.why import decision_sentence, ruled_out_clause
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases


def test_normal_win_names_margin_term_runner_up_and_the_latched_out() -> None:
    assert decision_sentence(cases.normal_win()) == (
        "coder-6b-b won by 0.04 on latency over coder-6b-a; "
        "v4-32k-a was ruled out by kv-cache 91% > 85% since 10:02:03."
    )


def test_tie_break() -> None:
    assert decision_sentence(cases.tie_break()) == "coder-6b-b won a tie-break over coder-6b-a (both scored 0.5)."


def test_fallback_says_who_served_and_who_ranked_first() -> None:
    text = decision_sentence(stub.sample_trace())
    assert text.startswith(f"{stub.SELECTED_INSTANCE} served the request after a fallback ({stub.FALLBACK_REASON})")
    assert f"{stub.TOP_RANKED} won by 0.13 on queue-depth over {stub.SELECTED_INSTANCE} in the ranking" in text
    assert text.endswith(f"{stub.REJECTED_INSTANCE} was ruled out by kv-cache 97% > 90% since 12:00:00.")


def test_no_feasible_instance() -> None:
    assert decision_sentence(cases.no_feasible()) == (
        "No instance was feasible and the request failed with HTTP 503 (no_feasible_instance): "
        "v4-32k-a was ruled out by kv-cache 91% > 85% since 10:02:03."
    )
    assert decision_sentence(cases.fail_open()).startswith(  # nothing was sent to it: it did not serve
        "No instance was feasible, so v4-32k-a was picked anyway (fail open), but no instance served the request "
        "(HTTP 503 no_feasible_instance; no attempt was made): v4-32k-a was ruled out"
    )


def test_unknown_model_gives_a_reason_not_dashes() -> None:
    text = decision_sentence(cases.unknown_model())
    assert text == "No candidate was considered for requested model 'gpt-9': the request ended with HTTP 404 " \
                   "(model_not_found)."
    assert "—" not in text


def test_single_feasible_candidate() -> None:
    from tests.factories import make_trace

    assert decision_sentence(make_trace()) == "v4-b was the only feasible candidate; v4-a was ruled out by " \
                                              "kv-cache 93% > 85%."


def test_many_rejections_are_capped() -> None:
    base = cases.no_feasible()
    many = [cases.cand(f"x{i}", None, None) for i in range(5)]
    clause = ruled_out_clause(base.model_copy(update={"candidates": many}))
    assert clause.startswith("x0 was ruled out by kv-cache") and "x2 by kv-cache" in clause
    assert clause.endswith("2 more were ruled out")


def test_a_rule_routed_request_names_the_rule_that_chose_its_candidates() -> None:
    """Only the rule's target was scored: the sentence says so before who won (the demo's rules)."""
    from schemas.trace_policy import PolicyStep

    step = PolicyStep(policy="policy.yaml@sha256:1", rule="code_tasks", target="coder-6b", chain_used=["coder-6b"])
    routed = cases.tie_break().model_copy(update={"policy": step, "rule": "code_tasks"})
    assert decision_sentence(routed) == ("Rule code_tasks sent it to coder-6b: coder-6b-b won a tie-break over "
                                         "coder-6b-a (both scored 0.5).")
    down = step.model_copy(update={"chain_used": ["v4-32k", "coder-6b"], "target": "v4-32k"})
    text = decision_sentence(cases.no_feasible().model_copy(update={"policy": down}))
    assert text.startswith("Rule code_tasks sent it to v4-32k (tried v4-32k -> coder-6b): no instance was feasible")
    throttled = step.model_copy(update={"throttled": "chain"})
    assert decision_sentence(routed.model_copy(update={"policy": throttled})).startswith(
        "Rule code_tasks matched (target coder-6b) and its throttle sent it down its chain: coder-6b-b won")
    unmatched = step.model_copy(update={"rule": None, "target": None})
    assert decision_sentence(routed.model_copy(update={"policy": unmatched})).startswith("coder-6b-b won")
    waited = step.model_copy(update={"throttled": "wait", "waited_s": 0.42})
    assert decision_sentence(routed.model_copy(update={"policy": waited})).startswith(
        "Rule code_tasks sent it to coder-6b once its throttle had a token (the request waited 0.42 s): coder-6b-b")


def test_a_request_refused_after_waiting_out_its_max_wait_says_how_long_it_waited() -> None:
    from schemas.trace_policy import PolicyStep

    step = PolicyStep(policy="p.yaml sha256:x", rule="to-coder", target="coder-6b", throttled="reject", waited_s=1.0)
    base = cases.normal_win()
    refused = base.model_copy(update={
        "candidates": [], "selected_model": None, "selected_instance": None, "attempts": [], "policy": step,
        "outcome": base.outcome.model_copy(update={"http_status": 429, "error_class": "rate_limit_exceeded"})})
    assert decision_sentence(refused) == (
        "Rule to-coder matched (target coder-6b), but its throttle was empty: the request waited 1.0 s (its "
        "max_wait) for a token that did not come, then was refused with HTTP 429 (rate_limit_exceeded) and "
        "forwarded to no instance.")
