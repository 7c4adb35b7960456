""""Why this model" tells what the trace says: who served (not who was picked), the rule's target as a stage,
its chain unjudged, and the feedback recorded on the request (found by an operator's audit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from ingest.duckdb.store import DuckDBTraceStore
from tests.app import stub_trace_api as stub
from tests.app.ui.data import audit_cases as cases
from tests.app.ui.test_trace_explorer_page import run_app

pytestmark = pytest.mark.usefixtures("clean_streamlit_caches")
MISROUTE = "Mark as misroute: make it a regression case"
CHAIN_ONLY = "not filtered or scored (rule's chain)"


def _frame(at: AppTest, column: str) -> Any:
    return next(df.value for df in at.dataframe if column in df.value.columns)


def _everything(at: AppTest) -> str:
    """Every text, caption and table cell of the page, as one string."""
    parts = [t.value for t in at.text] + [c.value for c in at.caption]
    parts += [df.value.astype(str).to_string() for df in at.dataframe]
    return "\n".join(parts)


@pytest.mark.parametrize("skips", [False, True], ids=["older-trace", "with-skip-records"])
def test_fail_open_onto_open_breakers_says_no_instance_served_and_why(monkeypatch: pytest.MonkeyPatch,
                                                                     skips: bool) -> None:
    trace = cases.breakers_fail_open(skips=skips)
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, trace.request_id)

    sentence = at.text[0].value
    assert sentence.startswith("No instance was feasible, so big-b was picked anyway (fail open), but no instance "
                               "served the request (HTTP 502 all_attempts_failed; no attempt was made")
    assert "used anyway" not in sentence
    texts = [t.value for t in at.text]
    assert "The request was not forwarded." in texts
    assert any(t.startswith("No instance served the request: HTTP 502 all_attempts_failed; no attempt was made")
               for t in texts)
    assert _frame(at, "verdict").set_index("instance").loc["big-b", "verdict"] == "selected, not served"
    waterfall = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert "no instance served" in waterfall["hovertext"][-1]
    refused = "big-b not sent: refused by its instance breaker big-b open"
    if skips:  # the gateway's record of the instances its breakers refused is read as it is
        assert refused in sentence
        assert refused in _frame(at, "what happened")["what happened"].tolist()
    else:
        assert not any("what happened" in df.value.columns for df in at.dataframe)


def test_a_failed_trial_on_another_instance_does_not_make_the_pick_served(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = cases.trial_failed()  # picked big-b; only big-a (a breaker's trial) was sent to, and failed: 502
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, trace.request_id)

    assert at.text[0].value.startswith("big-b won by 0.2 on queue over big-a, but no instance served the request "
                                       "(HTTP 502 all_attempts_failed; attempts: big-a connect_error")
    losers = _frame(at, "why not").set_index("instance")["why not"]
    assert losers["big-a"].startswith("tried first, but its attempt failed (connect_error, ClientConnectorError); "
                                      "no instance served the request (HTTP 502 all_attempts_failed")
    assert "big-b served" not in _everything(at) and "picked first" not in losers["big-a"]


def test_the_rule_s_target_is_a_stage_and_its_chain_is_neither_filtered_nor_ranked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    trace = cases.rule_with_chain()  # the trace's filters each "kept 2, rejected 0" of 4 candidates
    with stub.StubTraceApi([trace]) as api:
        at = run_app(monkeypatch, api.url, trace.request_id)

    waterfall = json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]
    assert waterfall["x"] == ["all candidates", "the rule's target", "filter/freshness", "filter/kv-cache",
                              "filter/breaker", "ranked", "selected"]
    assert waterfall["text"] == ["4", "2", "removed none · 2 left", "removed none · 2 left", "removed none · 2 left",
                                 "2", "1"]
    assert "coder-a, coder-b: not filtered or scored" in waterfall["hovertext"][1]
    verdicts = _frame(at, "verdict").set_index("instance")["verdict"]
    assert verdicts.to_dict() == {"v4-a": "selected", "v4-b": "feasible", "coder-a": CHAIN_ONLY,
                                  "coder-b": CHAIN_ONLY}


def test_a_recorded_verdict_shows_and_the_misroute_form_is_not_offered(monkeypatch: pytest.MonkeyPatch) -> None:
    trace, other = cases.rule_with_chain(), cases.trial_failed()
    with stub.StubTraceApi([trace, other], feedback=[cases.verdict(trace.request_id)]) as api:
        marked = run_app(monkeypatch, api.url, trace.request_id)
        unmarked = run_app(monkeypatch, api.url, other.request_id)

    assert [w.value for w in marked.warning] == [
        "Feedback: wrong: should have gone to coder-6b · from app · 2026-11-29 12:00:05 UTC"]
    assert MISROUTE not in [e.label for e in marked.expander]
    assert any("has a verdict already" in c.value and "409" in c.value for c in marked.caption)
    assert not any(w.value.startswith("Feedback:") for w in unmarked.warning)
    assert unmarked.expander[-1].label == MISROUTE  # no verdict on this one: it can still be marked


def test_a_verdict_stored_in_the_trace_file_is_read_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The store's own read (DuckDB), behind the read API: a "correct" verdict too, which misroutes never list.
    trace = cases.trial_failed()
    store = DuckDBTraceStore(tmp_path / "t.duckdb")
    store.write_records([trace, cases.verdict(trace.request_id, correct=True, expected_model=None)])
    try:
        with stub.StubTraceApi([], store=store) as api:
            at = run_app(monkeypatch, api.url, trace.request_id)
    finally:
        store.close()
    assert [s.value for s in at.success] == ["Feedback: correct · from app · 2026-11-29 12:00:05 UTC"]
    assert MISROUTE not in [e.label for e in at.expander]
