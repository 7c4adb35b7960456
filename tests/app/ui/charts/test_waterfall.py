"""The elimination waterfall figure."""

from __future__ import annotations

from app.ui.charts.waterfall import REMOVED_COLOUR, TOTAL_COLOUR, waterfall_chart
from app.ui.data.waterfall import waterfall_stages
from tests.app import stub_trace_api as stub
from tests.app.ui.data import why_cases as cases


def test_one_waterfall_trace_with_stages_drops_and_hover() -> None:
    fig = waterfall_chart(waterfall_stages(stub.sample_trace()))
    trace, left = fig.data
    assert trace.type == "waterfall"
    assert list(trace.x) == ["all candidates", "filter/kv-cache", "ranked", "selected"]
    assert list(trace.y) == [3, -1, 2, 1]
    assert list(trace.measure) == ["absolute", "relative", "absolute", "absolute"]
    assert list(trace.text) == ["3", f"−1: {stub.REJECTED_INSTANCE} · 2 left", "2", "1"]
    assert "kv_cache_usage 97% > 90%" in trace.hovertext[1]
    assert trace.decreasing.marker.color == REMOVED_COLOUR and trace.totals.marker.color == TOTAL_COLOUR
    assert left.type == "bar" and list(left.y) == [None, 2, None, None]  # the filter's kept set, pale


def test_a_filter_that_removed_nothing_says_so_and_how_many_are_left() -> None:
    # Issue 33: a filter that removed nothing read as "0 candidates left".
    trace = stub.sample_trace()
    steps = [s.model_copy(update={"rejected": []}) if s.step == "filter/kv-cache" else s for s in trace.decision_trace]
    fig = waterfall_chart(waterfall_stages(trace.model_copy(update={"decision_trace": steps})))
    assert fig.data[0].text[1] == "removed none · 3 left" and fig.data[0].hovertext[1] == "removed none"
    assert fig.data[0].y[1] == 0 and fig.data[0].measure[1] == "relative"  # no drop: the level stays at 3
    assert fig.data[1].y[1] == 3  # and a pale column 3 high stands under the label


def test_unknown_model_waterfall_is_all_zero() -> None:
    fig = waterfall_chart(waterfall_stages(cases.unknown_model()))
    assert list(fig.data[0].y) == [0, 0, 0]
