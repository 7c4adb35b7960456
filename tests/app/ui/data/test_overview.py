"""The Overview's data: series per bucket, headline totals with deltas, busiest rules and models, misroutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.ui.data import overview as data
from schemas.queries import BucketStats, Misroute, TrafficEdge

T0 = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)


def bucket(minute: int, requests: int, errors: int = 0, fallbacks: int = 0, p95: float | None = 100.0,
           cost: float = 1.0) -> BucketStats:
    return BucketStats(start=T0 + timedelta(minutes=minute), requests=requests, errors=errors, fallbacks=fallbacks,
                       fallback_rate=fallbacks / requests if requests else 0.0, latency_p50_ms=p95 and p95 / 2,
                       latency_p95_ms=p95, latency_p99_ms=p95 and p95 * 2, cost=cost)


def test_series_rates_and_order() -> None:
    frame = data.series([bucket(5, 10, errors=1, fallbacks=2), bucket(0, 0, p95=None, cost=0.0)])
    assert list(frame.columns) == list(data.SERIES_COLUMNS)
    assert frame["start"].tolist() == [T0, T0 + timedelta(minutes=5)]
    assert frame["error_rate"].isna().iloc[0] and frame["error_rate"].iloc[1] == 0.1
    assert frame["fallback_rate"].iloc[1] == 0.2


def test_headlines_totals_and_deltas() -> None:
    current = data.series([bucket(0, 30, errors=3, fallbacks=3, p95=100.0, cost=2.0),
                           bucket(1, 10, errors=1, fallbacks=0, p95=300.0, cost=1.0)])
    previous = data.series([bucket(-60, 20, errors=0, fallbacks=2, p95=100.0, cost=1.5)])
    got = {h.label: h for h in data.headlines(current, previous)}
    assert got["Requests"].value == 40 and got["Requests"].delta == 20 and got["Requests"].text == "40"
    assert got["Error rate"].value == pytest.approx(0.1) and got["Error rate"].delta == pytest.approx(0.1)
    assert got["Error rate"].text == "10%" and got["Error rate"].delta_text == "+10.0 pp (was 0%)"
    assert got["Fallback rate"].delta == pytest.approx(0.075 - 0.1)
    assert got["Fallback rate"].delta_text == "−2.5 pp (was 10%)"
    assert got["Latency p95"].value == pytest.approx(150.0)  # (30*100 + 10*300) / 40
    assert got["Latency p95"].text == "150 ms" and got["Latency p95"].delta_text == "+50 ms (was 100 ms)"
    assert got["Cost"].value == 3.0 and got["Cost"].delta == pytest.approx(1.5)
    assert got["Cost"].text == "3.00 cost units" and got["Requests"].delta_text == "+20 (was 20)"
    assert data.headlines(current, previous, "credits")[-1].text == "3.00 credits"
    assert got["Error rate"].worse_up and not got["Requests"].worse_up


def test_headlines_without_a_previous_window_have_no_delta() -> None:
    current = data.series([bucket(0, 5)])
    got = data.headlines(current, data.series([]))
    assert all(h.delta is None and h.delta_text is None for h in got)
    empty = data.headlines(data.series([]), data.series([]))
    assert [h.text for h in empty][1:] == ["—"] * 6


def test_busiest_rules_and_models() -> None:
    edges = [TrafficEdge(rule="code", model="m1", instance="a", requests=5),
             TrafficEdge(rule="code", model="m2", instance="b", requests=3),
             TrafficEdge(rule=None, model="m2", instance="c", requests=4)]
    rules = data.busiest(edges, "rule")
    assert rules.values.tolist() == [["code", 8, 8 / 12], ["(none)", 4, 4 / 12]]
    assert data.busiest(edges, "model", top=1).values.tolist() == [["m2", 7, 7 / 12]]
    assert data.busiest([], "model").empty


def test_misroutes_newest_first_with_links() -> None:
    rows = data.misroute_rows([
        Misroute(request_id="r-1", ts=T0, selected_model="m1", expected_model="m2"),
        Misroute(request_id="r 2", ts=T0 + timedelta(minutes=1), selected_model="m2"),
    ])
    assert list(rows.columns) == list(data.MISROUTE_COLUMNS)
    assert rows["request_id"].tolist() == ["r 2", "r-1"]
    assert rows["open"].tolist() == ["/trace?request_id=r+2", "/trace?request_id=r-1"]
    assert data.misroute_rows([]).empty
