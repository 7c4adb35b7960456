"""The fleet grid's data: a colour per threshold band, the worst metric, grey when stale, the snapshot at a moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.ui.data import fleet as data
from app.ui.limits import Limits
from schemas.config import AppSettings, ConstraintSpec, HealthBand, HealthThresholds
from schemas.fleet import InstanceSnapshot, LatchState
from schemas.records import RouterEvent

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TH = HealthThresholds()
# The router removes above 85% KV-cache (back below 80%) and past 10 waiting; errors and TTFT: app.health's bands.
LIM = Limits(constraints=(
    ConstraintSpec(name="kv-cache", metric="kv_cache_usage", threshold=0.85, enter_below=0.80),
    ConstraintSpec(name="queue", metric="queue", threshold=10),
))


def snap(instance: str = "a-1", model: str = "m", at: datetime = NOW, **gauges: object) -> InstanceSnapshot:
    return InstanceSnapshot.model_validate({"instance": instance, "model": model, "scraped_at": at, "age_s": 0.5,
                                            **gauges})


@pytest.mark.parametrize(("metric", "value", "status", "label"), [
    ("kv_cache_usage", 0.5, "green", "kv 50% / 85%"), ("kv_cache_usage", 0.80, "yellow", "kv 80% / 85%"),
    ("kv_cache_usage", 0.85, "yellow", "kv 85% / 85%"), ("kv_cache_usage", 0.86, "red", "kv 86% / 85%"),
    ("queue", 10, "green", "queue 10 / 10 requests"), ("queue", 11, "red", "queue 11 / 10 requests"),
    ("error_rate", 0.0, "green", "errors 0% / 5%"), ("error_rate", 0.01, "yellow", "errors 1% / 5%"),
    ("error_rate", 0.05, "red", "errors 5% / 5%"),
    ("ttft_p95_ms", 1999, "green", "p95 TTFT 1,999 ms / 5,000 ms"), ("ttft_p95_ms", 5000, "red",
                                                                      "p95 TTFT 5,000 ms / 5,000 ms"),
])
def test_a_tile_shows_one_metric_against_its_limit(metric: str, value: float, status: str, label: str) -> None:
    row = data.cells([snap(**{metric: value})], LIM, metric=metric).iloc[0]
    assert (row["status"], row["label"], row["worst"]) == (status, label, metric)


def test_band_of_still_grades_app_health_bands() -> None:
    assert [data.band_of(v, TH.queue) for v in (9, 10, 50)] == ["green", "yellow", "red"]
    assert data.band_of(None, HealthBand(yellow=1, red=2)) is None


def test_missing_value_is_grey_and_reads_a_dash() -> None:
    row = data.cells([snap()], LIM).iloc[0]
    assert row[["status", "label"]].tolist() == ["grey", "kv — / 85%"]


def test_a_latched_instance_is_red_whatever_the_shown_metric() -> None:
    out = LatchState(constraint="queue", out=True, since=NOW)
    row = data.cells([snap(kv_cache_usage=0.3, queue=4, latches=[out])], LIM).iloc[0]
    assert (row["status"], row["label"]) == ("red", "kv 30% / 85%<br>out: queue")


def test_worst_metric_is_named_and_other_red_metrics_are_listed() -> None:
    grid = data.cells([snap(kv_cache_usage=0.5, queue=60, error_rate=0.0), snap("a-2", kv_cache_usage=0.3)], LIM)
    assert grid[["status", "worst", "worst_status"]].values.tolist() == [["green", "queue", "red"],
                                                                          ["green", "kv_cache_usage", "green"]]
    assert data.elsewhere(grid) == ["a-1 (queue 60 / 10 requests)"]
    row = data.cells([snap(kv_cache_usage=0.97, queue=100)], LIM).iloc[0]
    assert row["worst"] == "queue"  # 100/10 beats 0.97/0.85
    table = data.table(grid)
    assert table.loc[0, "queue"] == "60 / 10 requests" and table.loc[0, "KV-cache"] == "50% / 85%"
    assert "None" not in table.to_string() and "nan" not in table.to_string()


def test_stale_is_grey_whatever_the_values() -> None:
    flagged = snap(kv_cache_usage=0.99, stale=True, age_s=9.0)
    old = snap("a-2", at=NOW - timedelta(seconds=30), kv_cache_usage=0.2)
    never = InstanceSnapshot(instance="a-3", model="m")
    grid = data.cells([flagged, old, never], LIM, moment=NOW).set_index("instance")
    assert grid["status"].tolist() == ["grey", "grey", "grey"]
    assert grid.loc["a-2", "label"] == "stale 30 s" and grid.loc["a-3", "label"] == "no scrape"
    fresh = data.cells([old], LIM, moment=NOW - timedelta(seconds=28)).iloc[0]
    assert fresh["status"] == "green" and fresh["age_s"] == 2.0


def test_known_instances_without_a_snapshot_are_grey_and_rows_are_sorted() -> None:
    grid = data.cells([snap("b-1", model="z", queue=1)], LIM, known=[("m", "a-9"), ("z", "b-1")])
    assert grid[["model", "instance", "status", "label"]].values.tolist() == [
        ["m", "a-9", "grey", "no snapshot"], ["z", "b-1", "grey", "kv — / 85%"]]
    assert grid["link"].tolist() == ["?instance=a-9", "?instance=b-1"]


def test_latched_constraints_are_listed() -> None:
    latches = [LatchState(constraint="kv-cache", out=True, since=NOW), LatchState(constraint="queue", out=False)]
    s = snap(latches=latches)
    assert data.cells([s], LIM).iloc[0]["latched"] == "kv-cache"


def test_snapshot_at_moment_is_the_latest_at_or_before_it() -> None:
    snaps = [snap("a", at=NOW - timedelta(seconds=s), queue=s) for s in (30, 20, 10, 0)]
    snaps += [snap("b", at=NOW + timedelta(seconds=5), queue=99), snap("b", at=NOW - timedelta(minutes=5), queue=7)]
    got = {s.instance: s.queue for s in data.at_moment(snaps, NOW - timedelta(seconds=10))}
    assert got == {"a": 10, "b": 7}
    assert {s.instance: s.queue for s in data.at_moment(snaps, NOW)} == {"a": 0, "b": 7}
    assert data.at_moment(snaps, NOW - timedelta(hours=1)) == []


def test_read_back_widens_only_while_an_instance_is_missing() -> None:
    calls: list[tuple[datetime, datetime]] = []
    stored = [snap("a", at=NOW - timedelta(seconds=5)), snap("b", at=NOW - timedelta(seconds=60))]

    def fetch(start: datetime, end: datetime) -> list[InstanceSnapshot]:
        calls.append((start, end))
        return [s for s in stored if s.scraped_at and start <= s.scraped_at < end]

    assert [s.instance for s in data.read_back(fetch, NOW, expected=["a"])] == ["a"]
    assert len(calls) == 1 and calls[0][1] > NOW
    calls.clear()
    assert [s.instance for s in data.read_back(fetch, NOW, expected=["a", "b"])] == ["b", "a"]
    assert calls[1] == (NOW - timedelta(minutes=2), NOW - timedelta(seconds=15))


def test_live_snapshots_skip_what_does_not_validate() -> None:
    state = {"instances": [snap("a").model_dump(mode="json"), {"instance": "x"}], "models": {}}
    assert [s.instance for s in data.live_snapshots(state)] == ["a"]
    assert data.live_snapshots(None) == [] and data.live_snapshots({"instances": "?"}) == []


def test_thresholds_and_live_api_from_the_environment() -> None:
    custom = AppSettings(health=HealthThresholds(queue=HealthBand(yellow=3, red=4)))
    assert data.thresholds_from_env({data.SETTINGS_ENV: custom.model_dump_json()}) == (custom.health, None)
    assert data.thresholds_from_env({}) == (HealthThresholds(), None)
    th, problem = data.thresholds_from_env({data.SETTINGS_ENV: '{"health": {"queue": {"yellow": 5, "red": 1}}}'})
    assert th == HealthThresholds() and problem and data.SETTINGS_ENV in problem
    assert data.live_api({"ROUTELENS_DB": "/x.duckdb"}) is None
    assert data.live_api({"ROUTELENS_DB": "/x", data.LIVE_ENV: "http://g:1/", "ROUTELENS_READ_TOKEN": "t"}) == (
        "http://g:1", "t")
    assert data.live_api({"ROUTELENS_API_URL": "http://s:2"}) == ("http://s:2", None)


def test_band_order_is_validated() -> None:
    with pytest.raises(ValueError, match="yellow must not exceed red"):
        HealthBand(yellow=2, red=1)


def test_series_transitions_and_served_rows() -> None:
    t1, t2 = NOW - timedelta(minutes=3), NOW - timedelta(minutes=1)
    out = LatchState(constraint="kv-cache", out=True, since=t1, value=0.91)
    back = LatchState(constraint="kv-cache", out=False, since=t2, value=0.7)
    snaps = [snap(at=t1, kv_cache_usage=0.91, latches=[out]), snap(at=t1 + timedelta(seconds=1), latches=[out]),
             snap(at=t2, kv_cache_usage=0.7, latches=[back])]
    series = data.instance_series(snaps)
    assert series["ts"].tolist() == [t1, t1 + timedelta(seconds=1), t2]
    assert list(series.columns) == list(data.SERIES_COLUMNS)
    ev = RouterEvent(event_id="e1", ts=NOW - timedelta(minutes=2), kind="breaker", instance="a-1", message="opened")
    moves = data.latch_transitions(snaps, [ev])
    assert moves[["source", "what"]].values.tolist() == [
        ["latch", "kv-cache out"], ["event", "breaker"], ["latch", "kv-cache back in"]]
    assert "0.91" in moves["detail"].iloc[0]


def test_offsets_and_labels() -> None:
    stops = data.offsets(timedelta(hours=1))
    assert stops[0] == 3600 and stops[-1] == 0 and len(stops) == 31
    assert [data.offset_label(s) for s in (0, 45, 1800, 5 * 3600 + 1800, 2 * 86400 + 6 * 3600)] == [
        "now", "−45s", "−30m", "−5h 30m", "−2d 6h"]
    assert data.trace_link("a b/c") == "/trace?request_id=a+b%2Fc"


def test_floor_time() -> None:
    t = datetime(2026, 12, 1, 12, 0, 7, 500, tzinfo=UTC)
    assert data.floor_time(t, 5) == datetime(2026, 12, 1, 12, 0, 5, tzinfo=UTC)
    assert data.floor_time(NOW, 5) == NOW


def test_a_latch_value_read_after_the_spike_is_not_shown_as_what_broke_it() -> None:
    """The audit's queue latch: out, stored with queue 0 (the spike over by the snapshot): said as read later."""
    t1 = NOW - timedelta(minutes=3)
    spike_over = LatchState(constraint="queue", out=True, since=t1, value=0.0)
    breaking = LatchState(constraint="kv-cache", out=True, since=t1, value=0.93)
    moves = data.latch_transitions([snap(at=t1, latches=[spike_over, breaking])], [], LIM)
    detail = dict(zip(moves["what"], moves["detail"], strict=True))
    assert detail["queue out"] == ("held out of the feasible set (0 / 10 requests when stored, within the limit again: "
                                   "it broke it before)")
    assert detail["kv-cache out"] == "held out of the feasible set (93% / 85%)"
