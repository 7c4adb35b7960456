"""app.ui.data.experiments: sides, the metric table, the SRM sentence, series and shadow flips."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from app.ui.data import experiments as data
from schemas.queries import BucketStats

T = datetime(2026, 11, 1, 9, tzinfo=UTC)


def test_pick_sides_keeps_known_choices_and_falls_back_to_the_busiest() -> None:
    groups = {"a": 10, "b": 30, "c": 20}
    assert data.pick_sides(groups, None, None) == (["b", "c", "a"], "b", "c")
    assert data.pick_sides(groups, "a", "c") == (["b", "c", "a"], "a", "c")
    assert data.pick_sides(groups, "a", "a")[1:] == ("a", "b")
    assert data.pick_sides(groups, "zz", None)[1:] == ("b", "c")
    assert data.pick_sides({}, "a", "b") == ([], None, None)
    assert data.pick_sides({"a": 1}, None, None) == (["a"], "a", None)


REPORT = {
    "n_a": 500, "n_b": 430, "shares": [0.5, 0.5], "srm_p": 0.02, "srm_flag": False,
    "metrics": {
        "cost_per_request": {"a": 2.0, "b": 1.6, "delta": -0.4, "ci": [-0.45, -0.35], "p_adjusted": 0.0001,
                             "significant_after_correction": True, "enough_data": True},
        "error_rate": {"a": 0.05, "b": 0.05, "delta": 0.0, "ci": [-0.02, 0.02], "p_adjusted": 1.0,
                       "significant_after_correction": False, "enough_data": True},
        "misroute_rate": {"a": None, "b": None, "delta": None, "ci": None, "enough_data": False},
    },
}


def test_metric_table_in_report_order_with_intervals() -> None:
    table = data.metric_table(REPORT)
    assert list(table.columns) == list(data.METRIC_COLUMNS)
    assert list(table["metric"]) == ["error rate", "cost per request", "misroute rate"]
    cost = table.iloc[1]
    assert (cost["A"], cost["B - A"], cost["CI low"], cost["CI high"], cost["moved"]) == (
        "2.00 cost units", "−0.40 cost units", "−0.45 cost units", "−0.35 cost units", "yes")
    assert (table.iloc[0]["A"], table.iloc[0]["CI high"], table.iloc[0]["p (Holm)"]) == ("5%", "+2.0 pp", "1")
    assert table.iloc[2]["note"] == "not enough data" and table.iloc[2]["CI low"] == "—"
    assert data.metric_table(REPORT, "credits").iloc[1]["B"] == "1.60 credits"
    assert "None" not in table.to_string()


@pytest.mark.parametrize(("p", "flag", "level", "says"), [
    (0.5, False, "ok", "Split as designed"), (0.005, False, "warning", "drifting"),
    (0.0001, True, "error", "Sample ratio mismatch"), (None, False, "warning", "not checked"),
])
def test_srm_status(p: float | None, flag: bool, level: str, says: str) -> None:
    got_level, sentence = data.srm_status({**REPORT, "srm_p": p, "srm_flag": flag})
    assert got_level == level and says in sentence and "500 / 430" in sentence
    assert "forced" not in sentence.lower()


def test_srm_status_says_how_many_forced_requests_were_left_out() -> None:
    level, sentence = data.srm_status({**REPORT, "srm_p": 0.5, "forced_a": 3, "forced_b": 1_200})
    assert level == "ok" and sentence.endswith("Forced onto an arm by header and left out: 3 / 1,200.")


def test_series_over_the_window_breaks_at_empty_buckets_and_marks_the_filling_one() -> None:
    b = [BucketStats(start=T + timedelta(minutes=k), requests=5, errors=1, fallbacks=0, fallback_rate=0.0,
                     cost=1.0) for k in (0, 1, 4)]
    frame = data.series({"a": b}, T, T + timedelta(minutes=4, seconds=30), "1m")
    assert list(frame["requests"]) == [5, 5, 0, 0, 5]
    assert frame["error_rate"].isna().tolist() == [False, False, True, True, False]  # a gap, not a zero
    assert frame["partial"].tolist() == [False, False, False, False, True]  # the last minute is half over
    assert data.first_start({"a": b, "b": []}) == T and data.first_start({"a": []}) is None


def test_series_has_one_row_per_side_and_bucket() -> None:
    b = [BucketStats(start=T + timedelta(hours=k), requests=10 * k, errors=k, fallbacks=0, fallback_rate=0.0,
                     latency_p95_ms=100.0 + k, cost=2.0 * k) for k in range(3)]
    frame = data.series({"b": b[1:], "a": b})
    assert list(frame.columns) == list(data.SERIES_COLUMNS)
    assert list(frame["side"]) == ["a", "a", "a", "b", "b"]
    first = frame.iloc[0]
    assert first["requests"] == 0 and pd.isna(first["error_rate"]) and pd.isna(first["cost_per_request"])
    assert frame.iloc[1]["error_rate"] == 0.1 and frame.iloc[1]["cost_per_request"] == 0.2


def _trace(rid: str, model: str, shadow_model: str | None, flipped: bool = False) -> dict[str, object]:
    shadow = None if shadow_model is None else {"router_version": "v2", "selected_model": shadow_model,
                                                "selected_instance": shadow_model + "-a", "flipped": flipped}
    return {"request_id": rid, "selected_model": model, "selected_instance": model + "-a", "shadow": shadow}


def test_shadow_pairs_matrix_and_summary() -> None:
    traces = [_trace("1", "m", "m"), _trace("2", "m", "n", True), _trace("3", "n", "n"), _trace("4", "n", None)]
    pairs = data.shadow_pairs(traces)
    assert list(pairs["request_id"]) == ["1", "2", "3"]
    matrix = data.flip_matrix(pairs)
    assert matrix.loc["m", "n"] == 1 and matrix.loc["m", "m"] == 1 and matrix.loc["n", "n"] == 1
    assert (matrix.index.name, matrix.columns.name) == ("live", "shadow")
    assert data.flip_matrix(pairs, "instance").loc["m-a", "n-a"] == 1
    assert data.flip_counts(pairs) == {"model": 1, "instance": 0, "same": 2}
    assert data.shadow_summary(pairs, 4) == (
        "3 of the 4 newest traces carry a shadow decision (v2): 1 would have gone elsewhere (33.3%): 1 model change "
        "(off the diagonal of the model grid) and 0 instance-only changes (same model, another instance); 2 the same.")
    moved = data.shadow_pairs([*traces, {**_trace("5", "m", "m"), "shadow": {"selected_model": "m",
                                                                             "selected_instance": "m-b"}}])
    assert data.flip_counts(moved) == {"model": 1, "instance": 1, "same": 2}
    empty = data.shadow_pairs([_trace("4", "n", None)])
    assert data.flip_matrix(empty).empty and "experiments.shadow" in data.shadow_summary(empty, 1)
