"""The Overview figures: traces, panels and colours for a given frame."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd

from app.ui.charts import overview as charts
from app.ui.data import overview as data
from schemas.queries import BucketStats, TrafficEdge

T0 = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_overview_chart_traces_and_colours() -> None:
    frame = data.series([BucketStats(start=T0 + timedelta(minutes=i), requests=10 + i, errors=i, fallbacks=1,
                                     fallback_rate=0.1, latency_p50_ms=50, latency_p95_ms=90, latency_p99_ms=120,
                                     cost=0.5) for i in range(3)])
    figure = charts.overview_chart(frame, "1m", T0, T0 + timedelta(minutes=3))
    fig = json.loads(figure.to_json())
    names = [t["name"] for t in fig["data"]]
    assert names == ["requests", "error rate", "fallback rate", "p50", "p95", "p99", "cost"]
    assert fig["data"][0]["type"] == "bar" and list(figure.data[0].y) == [10, 11, 12]
    assert fig["data"][0]["marker"]["color"] == charts.SERIES_COLOURS["requests"]
    assert fig["data"][1]["line"]["color"] == charts.SERIES_COLOURS["error_rate"]
    assert list(figure.data[1].y) == [0.0, 1 / 11, 2 / 12]
    assert [t["yaxis"] for t in fig["data"]] == ["y", "y2", "y2", "y3", "y3", "y3", "y4"]
    assert fig["layout"]["title"]["text"] == "Per 1-minute bucket"
    assert not fig["layout"].get("shapes")  # three whole minutes: nothing is filling


def test_gaps_break_the_lines_and_the_filling_bucket_is_marked() -> None:
    buckets = [BucketStats(start=T0 + timedelta(minutes=i), requests=10, errors=1, fallbacks=0, fallback_rate=0.0,
                           latency_p95_ms=90, cost=0.5) for i in (0, 1, 4, 5)]
    end = T0 + timedelta(minutes=5, seconds=15)
    figure = charts.overview_chart(data.series(buckets, T0, end, "1m"), "1m", T0, end, "credits")
    requests = figure.data[0]
    assert list(requests.y) == [10, 10, 0, 0, 10, 10]  # empty minutes are zero requests, not skipped
    assert list(requests.marker.opacity) == [1, 1, 1, 1, 1, 0.35]  # the filling minute is pale
    errors = next(t for t in figure.data if t.name == "error rate")
    assert [pd.isna(v) for v in errors.y] == [False, False, True, True, False, True]  # gaps, and the stub below
    stub = next(t for t in figure.data if t.name == "error rate (filling)")
    assert list(stub.y) == [0.1, 0.1] and stub.line.dash == "dot"
    assert {s.x0 for s in figure.layout.shapes} == {T0 + timedelta(minutes=5)}
    assert figure.layout.annotations[-1].text == "filling"
    assert figure.layout.annotations[3].text == "cost (credits)"


def test_busiest_chart_bars() -> None:
    table = data.busiest([TrafficEdge(rule="r1", model="m", instance="i", requests=3),
                          TrafficEdge(rule="r2", model="m", instance="i", requests=1)], "rule")
    (bar,) = charts.busiest_chart(table, "rule").data
    assert list(bar.y) == ["r1", "r2"] and list(bar.x) == [3, 1] and list(bar.text) == ["3 (75%)", "1 (25%)"]
