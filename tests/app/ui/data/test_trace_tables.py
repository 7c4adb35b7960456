from __future__ import annotations

import math

import pandas as pd
import pytest

from app.ui.data import trace_tables as tt
from schemas import CandidateEval, DecisionTrace, OutcomeStatus
from tests.app import stub_trace_api as stub


def test_summary_headline_facts(trace: DecisionTrace) -> None:
    facts = tt.summary(trace)

    assert facts["request_id"] == stub.SAMPLE_REQUEST_ID
    assert facts["selected"] == f"{stub.SELECTED_MODEL} → {stub.SELECTED_INSTANCE}"
    assert facts["fallback"] == f"yes — {stub.FALLBACK_REASON}"
    assert facts["mode"] == "normal"
    assert facts["decision_latency"] == "1.84 ms"
    assert facts["outcome"] == "ok · HTTP 200 · 3,890 ms"
    assert facts["intent"] == "code (82%)"
    assert facts["ts"] == "2025-11-29T12:00:00+00:00"
    assert all(isinstance(v, str) for v in facts.values())


def test_summary_without_selection_or_fallback(trace: DecisionTrace) -> None:
    bare = trace.model_copy(
        update={"selected_model": None, "selected_instance": None, "fallback_triggered": False, "intent": None}
    )
    facts = tt.summary(bare)
    assert facts["selected"] == "none"
    assert facts["fallback"] == "no"
    assert facts["intent"] == "—"


def test_summary_says_an_arm_was_forced(trace: DecisionTrace) -> None:
    assert tt.summary(trace.model_copy(update={"experiment_arm": "b"}))["experiment_arm"] == "b"
    forced = trace.model_copy(update={"experiment_arm": "b", "arm_forced": True})
    assert tt.summary(forced)["experiment_arm"] == "b (forced by header: left out of comparisons)"


def test_headline_tiles(trace: DecisionTrace) -> None:
    assert tt.headline(trace) == {
        "Fallback": "yes",
        "Mode": "normal",
        "Decision latency": "1.84 ms",
        "Outcome (HTTP)": "200 ok",
        "Total time": "3,890 ms",
    }


def test_headline_values_are_short_enough_for_a_tile(trace: DecisionTrace) -> None:
    """The audit: 'ok · HTT…' at 1400 px (a tile holds ~10 characters of its type): an HTTP status line, and a
    duration past 10 s in seconds."""
    slow = trace.model_copy(update={"latency_ms": 12_345.6, "outcome": trace.outcome.model_copy(
        update={"status": OutcomeStatus.ERROR, "http_status": 502, "total_ms": 66_012.3})})
    tiles = tt.headline(slow)
    assert tiles["Outcome (HTTP)"] == "502 error"
    assert (tiles["Decision latency"], tiles["Total time"]) == ("12.3 s", "66.0 s")
    assert max(len(v) for v in tiles.values()) <= 10, tiles


def test_steps_frame_in_order_with_kept_and_rejected(trace: DecisionTrace) -> None:
    frame = tt.steps_frame(trace.model_copy(update={"decision_trace": trace.decision_trace[::-1]}))

    assert list(frame.columns) == list(tt.STEP_COLUMNS)
    assert frame["seq"].tolist() == list(range(10))
    kv = frame[frame["step"] == "filter/kv-cache"].iloc[0]
    assert kv["kind"] == "filter"
    assert kv["kept"] == f"{stub.TOP_RANKED}, {stub.SELECTED_INSTANCE}"
    assert kv["rejected"] == stub.REJECTED_INSTANCE


def test_ranking_frame_best_first_and_narrow(trace: DecisionTrace) -> None:
    frame = tt.ranking_frame(trace)

    assert list(frame.columns) == list(tt.RANKING_COLUMNS)
    assert frame["instance"].tolist() == [stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE]
    assert frame["verdict"].tolist() == ["feasible", "selected", "ruled out"]
    assert frame["rank"].isna().tolist() == [False, False, True]
    assert frame["total"].tolist()[:2] == [0.742, 0.61]
    assert frame["gap"].tolist()[:2] == pytest.approx([0.0, 0.132])
    assert math.isnan(frame["gap"].tolist()[2])


def test_state_frame_is_the_snapshot_per_candidate(trace: DecisionTrace) -> None:
    frame = tt.state_frame(trace)

    assert list(frame.columns) == ["instance", *tt.GAUGE_COLUMNS]
    row = frame.set_index("instance").loc[stub.REJECTED_INSTANCE]
    assert row["kv_cache_usage"] == 0.97 and row["queue"] == 14 and not row["stale"]
    bare = CandidateEval(instance="x", model="m", feasible=True)
    no_state = tt.state_frame(trace.model_copy(update={"candidates": [bare]}))
    assert pd.isna(no_state.loc[0, "queue"])


def test_attempts_frame(trace: DecisionTrace) -> None:
    frame = tt.attempts_frame(trace)

    assert list(frame.columns) == list(tt.ATTEMPT_COLUMNS)
    assert frame["instance"].tolist() == [stub.TOP_RANKED, stub.SELECTED_INSTANCE]
    assert frame["status"].tolist() == ["timeout", "ok"]
    assert frame.loc[0, "error_class"] == "ReadTimeout"
    assert frame["error_class"].isna().tolist() == [False, True]
    assert frame["http_status"].isna().tolist() == [True, False]
    assert frame["latency_ms"].tolist() == [3000, 812]


def test_empty_lists_give_empty_frames_with_columns(trace: DecisionTrace) -> None:
    empty = trace.model_copy(update={"candidates": [], "decision_trace": [], "attempts": [], "score_weights": []})

    steps, cands, attempts = tt.steps_frame(empty), tt.ranking_frame(empty), tt.attempts_frame(empty)
    assert steps.empty and list(steps.columns) == list(tt.STEP_COLUMNS)
    assert attempts.empty and list(attempts.columns) == list(tt.ATTEMPT_COLUMNS)
    assert cands.empty
    assert list(cands.columns) == list(tt.RANKING_COLUMNS)
    assert tt.rejections(empty) == {}


def test_rejections(trace: DecisionTrace) -> None:
    assert tt.rejections(trace) == {stub.REJECTED_INSTANCE: f"kv-cache: kv_cache_usage 97% > 90% — {stub.KV_REASON}"}


def test_score_terms_frame_long_form_best_first(trace: DecisionTrace) -> None:
    frame = tt.score_terms_frame(trace)

    assert list(frame.columns) == list(tt.SCORE_TERM_COLUMNS)
    assert frame["instance"].tolist() == [stub.TOP_RANKED] * 3 + [stub.SELECTED_INSTANCE] * 3  # rejected: no terms
    assert frame["term"].tolist()[:3] == ["queue-depth", "kv-cache", "latency"]
    assert (frame["raw"] * frame["weight"]).tolist() == pytest.approx(frame["weighted"].tolist())
    assert frame.loc[0, "weighted"] == pytest.approx(0.27)


def test_score_terms_frame_empty_keeps_columns_and_types(trace: DecisionTrace) -> None:
    frame = tt.score_terms_frame(trace.model_copy(update={"candidates": []}))
    assert frame.empty and list(frame.columns) == list(tt.SCORE_TERM_COLUMNS)
    assert frame["weighted"].dtype == "float64"


def test_state_table_reads_each_gauge_against_its_limit() -> None:
    from app.ui.limits import Limits
    from schemas.config import ConstraintSpec
    from tests.factories import make_trace

    limits = Limits(constraints=(ConstraintSpec(name="kv-cache", metric="kv_cache_usage", threshold=0.85),))
    table = tt.state_table(make_trace(), limits)  # v4-b selected (kv 0.2, queue 1), v4-a ruled out (0.93, 3)
    assert table.values.tolist() == [
        ["v4-b", "1 / 50 requests", "—", "20% / 85%", "—", "— / 5%", "0.3 s", "no"],
        ["v4-a", "3 / 50 requests", "—", "93% / 85%", "—", "— / 5%", "0.4 s", "no"],
    ]
