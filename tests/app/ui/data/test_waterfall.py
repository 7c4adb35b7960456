"""Waterfall stages from a trace."""

from __future__ import annotations

from app.ui.data.waterfall import STAGE_COLUMNS, waterfall_stages
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases


def test_stages_of_the_sample() -> None:
    frame = waterfall_stages(stub.sample_trace())
    assert list(frame.columns) == list(STAGE_COLUMNS)
    assert frame["stage"].tolist() == ["all candidates", "filter/kv-cache", "ranked", "selected"]
    assert frame["count"].tolist() == [3, 2, 2, 1]
    assert frame["change"].tolist() == [3, -1, 2, 1]
    assert frame["measure"].tolist() == ["absolute", "relative", "absolute", "absolute"]
    kv = frame.iloc[1]
    assert kv["removed"] == stub.REJECTED_INSTANCE
    assert f"{stub.REJECTED_INSTANCE}: kv-cache: kv_cache_usage 97% > 90%" in kv["detail"]


def test_without_filter_steps_removals_are_grouped_by_constraint() -> None:
    frame = waterfall_stages(cases.normal_win())
    assert frame["stage"].tolist() == ["all candidates", "filter/kv-cache", "ranked", "selected"]
    assert frame["count"].tolist() == [3, 2, 2, 1]
    assert "kv_cache_usage 91% > 85% — latched out until 0.8 holds for 10s" in frame.iloc[1]["detail"]


def test_unknown_model_has_empty_stages() -> None:
    frame = waterfall_stages(cases.unknown_model())
    assert frame["count"].tolist() == [0, 0, 0]
    assert frame.iloc[-1]["detail"] == "nothing selected"
