"""The Overview figures: traces, panels and colours for a given frame."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from app.ui.charts import overview as charts
from app.ui.data import overview as data
from schemas.queries import BucketStats, TrafficEdge

T0 = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def test_overview_chart_traces_and_colours() -> None:
    frame = data.series([BucketStats(start=T0 + timedelta(minutes=i), requests=10 + i, errors=i, fallbacks=1,
                                     fallback_rate=0.1, latency_p50_ms=50, latency_p95_ms=90, latency_p99_ms=120,
                                     cost=0.5) for i in range(3)])
    figure = charts.overview_chart(frame, "1m")
    fig = json.loads(figure.to_json())
    names = [t["name"] for t in fig["data"]]
    assert names == ["requests", "error rate", "fallback rate", "p50", "p95", "p99", "cost"]
    assert fig["data"][0]["type"] == "bar" and list(figure.data[0].y) == [10, 11, 12]
    assert fig["data"][0]["marker"]["color"] == charts.SERIES_COLOURS["requests"]
    assert fig["data"][1]["line"]["color"] == charts.SERIES_COLOURS["error_rate"]
    assert list(figure.data[1].y) == [0.0, 1 / 11, 2 / 12]
    assert [t["yaxis"] for t in fig["data"]] == ["y", "y2", "y2", "y3", "y3", "y3", "y4"]
    assert fig["layout"]["title"]["text"] == "Per 1m bucket"


def test_busiest_chart_bars() -> None:
    table = data.busiest([TrafficEdge(rule="r1", model="m", instance="i", requests=3),
                          TrafficEdge(rule="r2", model="m", instance="i", requests=1)], "rule")
    (bar,) = charts.busiest_chart(table, "rule").data
    assert list(bar.y) == ["r1", "r2"] and list(bar.x) == [3, 1] and list(bar.text) == ["75%", "25%"]
