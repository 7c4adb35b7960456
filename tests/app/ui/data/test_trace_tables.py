from __future__ import annotations

import math

import pandas as pd
import pytest

from app.ui.data import trace_tables as tt
from schemas import CandidateEval, DecisionTrace, ScoreWeight
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


def test_headline_tiles(trace: DecisionTrace) -> None:
    assert tt.headline(trace) == {
        "Fallback": "yes",
        "Mode": "normal",
        "Decision latency": "1.84 ms",
        "Outcome": "ok · HTTP 200",
        "Total time": "3,890 ms",
    }


def test_steps_frame_in_order_with_kept_and_rejected(trace: DecisionTrace) -> None:
    frame = tt.steps_frame(trace.model_copy(update={"decision_trace": trace.decision_trace[::-1]}))

    assert list(frame.columns) == list(tt.STEP_COLUMNS)
    assert frame["seq"].tolist() == list(range(10))
    kv = frame[frame["step"] == "filter/kv-cache"].iloc[0]
    assert kv["kind"] == "filter"
    assert kv["kept"] == f"{stub.TOP_RANKED}, {stub.SELECTED_INSTANCE}"
    assert kv["rejected"] == stub.REJECTED_INSTANCE


def test_candidates_frame_ranked_then_rejected(trace: DecisionTrace) -> None:
    frame = tt.candidates_frame(trace)

    assert frame["instance"].tolist() == [stub.TOP_RANKED, stub.SELECTED_INSTANCE, stub.REJECTED_INSTANCE]
    assert frame["verdict"].tolist() == ["feasible", "feasible", "rejected"]
    assert frame["rank"].tolist()[:2] == [1, 2]
    assert frame["rank"].isna().tolist() == [False, False, True]
    assert frame["selected"].tolist() == [False, True, False]
    assert frame["total"].tolist()[:2] == [0.742, 0.61]


def test_candidates_frame_columns_and_score_terms(trace: DecisionTrace) -> None:
    frame = tt.candidates_frame(trace)

    assert list(frame.columns) == [
        *tt.CANDIDATE_BASE_COLUMNS,
        "queue-depth",
        "kv-cache",
        "latency",
        "total",
        "rank",
        "selected",
        *tt.GAUGE_COLUMNS,
    ]
    top = frame.iloc[0]
    assert top["queue-depth"] == pytest.approx(0.27)
    assert top["kv-cache"] == pytest.approx(0.232)
    assert top["latency"] == pytest.approx(0.24)
    rejected = frame.iloc[2]
    assert all(math.isnan(rejected[c]) for c in ("queue-depth", "kv-cache", "latency", "total"))


def test_candidates_frame_rejected_row_explains_itself(trace: DecisionTrace) -> None:
    row = tt.candidates_frame(trace).set_index("instance").loc[stub.REJECTED_INSTANCE]

    assert row["violations"] == f"kv-cache: kv_cache_usage 0.97 > 0.9 — {stub.KV_REASON}"
    assert row["kv_cache_usage"] == 0.97
    assert row["queue"] == 14
    assert not row["stale"]


def test_score_term_named_like_a_gauge_gets_a_prefix(trace: DecisionTrace) -> None:
    cand = CandidateEval(
        instance="x",
        model="m",
        feasible=True,
        score_terms=[1.0],
        total=0.5,
        rank=1,
    )
    weights = [ScoreWeight(name="queue", weight=0.5, scorer="queue/queue-depth-scorer")]
    frame = tt.candidates_frame(trace.model_copy(update={"candidates": [cand], "score_weights": weights}))
    assert frame.loc[0, "score:queue"] == 0.5
    assert pd.isna(frame.loc[0, "queue"])  # the gauge column: no state recorded


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

    steps, cands, attempts = tt.steps_frame(empty), tt.candidates_frame(empty), tt.attempts_frame(empty)
    assert steps.empty and list(steps.columns) == list(tt.STEP_COLUMNS)
    assert attempts.empty and list(attempts.columns) == list(tt.ATTEMPT_COLUMNS)
    assert cands.empty
    assert list(cands.columns) == [*tt.CANDIDATE_BASE_COLUMNS, "total", "rank", "selected", *tt.GAUGE_COLUMNS]
    assert tt.rejections(empty) == {}


def test_rejections(trace: DecisionTrace) -> None:
    assert tt.rejections(trace) == {stub.REJECTED_INSTANCE: f"kv-cache: kv_cache_usage 0.97 > 0.9 — {stub.KV_REASON}"}


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
