"""``routelens trace`` tells what the trace says: the policy record, who served (not who was picked), a rule's
chain unjudged, and the feedback recorded on the request (found by an operator's audit of the app)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from tests.app import stub_trace_api as stub
from tests.app.ui.data import audit_cases as cases

CHAIN_ONLY = "not filtered or scored (rule's chain)"


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: nothing but the options chooses the source


def tree_of(request_id: str, api: stub.StubTraceApi, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["trace", request_id, "--api", api.url]) == 0
    return capsys.readouterr().out


def line_of(text: str, *parts: str) -> str:
    return next(line for line in text.splitlines() if all(p in line for p in parts))


def test_the_policy_record_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.rule_with_chain()
    with stub.StubTraceApi([trace]) as api:
        out = tree_of(trace.request_id, api, capsys)
    assert "Routing rule" in out
    assert ("Rule legal matched after 2 tried and sent the request to deepseek-v4-32k. Chain coder-6b; used "
            "deepseek-v4-32k.") in out
    assert line_of(out, "tried short_chat").endswith("no  input_length = 900 > 200")
    assert line_of(out, "tried legal").endswith("matched  contains_legal_terms(prompt): true")


def test_the_rule_s_chain_reads_unjudged_not_feasible(capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.rule_with_chain()  # every filter step: kept 2, rejected 0 (the target's two)
    with stub.StubTraceApi([trace]) as api:
        out = tree_of(trace.request_id, api, capsys)
    for instance, rank in (("coder-a", 3), ("coder-b", 4)):
        line = line_of(out, f"{instance} (coder-6b)")
        assert CHAIN_ONLY in line and f"rank {rank}" in line and "feasible" not in line
    assert "feasible" in line_of(out, "v4-b (deepseek-v4-32k)")


@pytest.mark.parametrize("skips", [False, True], ids=["older-trace", "with-skip-records"])
def test_a_pick_that_nothing_served_says_so_and_why(skips: bool, capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.breakers_fail_open(skips=skips)
    with stub.StubTraceApi([trace]) as api:
        out = tree_of(trace.request_id, api, capsys)
    assert line_of(out, "big-b (big)").endswith("← selected, not served")
    why = line_of(out, "no instance served")
    assert "HTTP 502 all_attempts_failed; no attempt was made" in why
    assert ("big-b not sent: refused by its instance breaker big-b open" in why) is skips
    assert "none: the request was not forwarded" in out


def test_a_failed_trial_elsewhere_is_not_the_pick_serving(capsys: pytest.CaptureFixture[str]) -> None:
    trace = cases.trial_failed()
    with stub.StubTraceApi([trace]) as api:
        out = tree_of(trace.request_id, api, capsys)
    assert line_of(out, "big-b (big)").endswith("← selected, not served")
    assert "attempts: big-a connect_error ClientConnectorError" in line_of(out, "no instance served")


def test_the_verdict_on_the_request_is_shown(capsys: pytest.CaptureFixture[str]) -> None:
    trace, other = cases.rule_with_chain(), cases.trial_failed()
    with stub.StubTraceApi([trace, other], feedback=[cases.verdict(trace.request_id)]) as api:
        marked = tree_of(trace.request_id, api, capsys)
        unmarked = tree_of(other.request_id, api, capsys)
    assert "Feedback (1)" in marked
    assert "wrong: should have gone to coder-6b · from app · 2026-11-29 12:00:05 UTC" in marked
    assert "Feedback none recorded" in unmarked
