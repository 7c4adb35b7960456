"""One instance over a whole window: read page after page (or sampled past a budget), bucketed with its gaps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pandas as pd

from app.ui.data import fleet
from app.ui.data.instance_window import bucketed, read_window
from schemas.fleet import InstanceSnapshot

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
START = NOW - timedelta(hours=1)
GAP = (START + timedelta(minutes=20), START + timedelta(minutes=25))  # the instance was down
SPIKE = START + timedelta(minutes=40, seconds=7)


def scrapes() -> list[InstanceSnapshot]:
    """One a second over the hour but for a five-minute gap, KV-cache 50% with one 1-second spike to 97%."""
    out = []
    for s in range(3600):
        ts = START + timedelta(seconds=s)
        if GAP[0] <= ts < GAP[1]:
            continue
        out.append(InstanceSnapshot(instance="a", model="m", scraped_at=ts, kv_cache_usage=0.97 if ts == SPIKE else 0.5,
                                    queue=2))
    return out


class Store:
    """The store's ``snapshots``: oldest first in ``[start, end)``, at most ``limit``; counts its calls."""

    def __init__(self, snaps: Sequence[InstanceSnapshot]) -> None:
        self.snaps, self.calls = list(snaps), 0

    def __call__(self, start: datetime, end: datetime, limit: int) -> list[InstanceSnapshot]:
        self.calls += 1
        return [s for s in self.snaps if s.scraped_at is not None and start <= s.scraped_at < end][:limit]


def test_every_snapshot_of_the_window_is_read_not_the_first_page() -> None:
    store = Store(scrapes())
    got = read_window(store, START, NOW, page=1000)
    assert not got.is_sampled and len(got.snapshots) == 3300
    assert got.snapshots[0].scraped_at == START and got.snapshots[-1].scraped_at == NOW - timedelta(seconds=1)
    assert store.calls == 4  # 1000 + 1000 + 1000 + the rest (each page starts at the last one seen)


def test_past_the_budget_every_span_is_sampled() -> None:
    store = Store(scrapes())
    got = read_window(store, START, NOW, page=100, max_pages=2, spans=12)
    assert got.is_sampled and got.per_span == 16
    times = [s.scraped_at for s in got.snapshots if s.scraped_at is not None]
    spans = {int((t - START) / timedelta(minutes=5)) for t in times}
    assert spans == set(range(12)) - {4}  # every five minutes but the gap's
    assert len(got.snapshots) == 11 * 16


def test_a_page_of_one_instant_does_not_loop() -> None:
    same = [InstanceSnapshot(instance="a", model="m", scraped_at=START, queue=float(i)) for i in range(5)]
    store = Store(same)
    got = read_window(store, START, NOW, page=5, max_pages=8, spans=4)
    assert got.is_sampled and store.calls == 1 + 4


def test_a_long_series_is_bucketed_by_its_highest_value_and_keeps_its_gap() -> None:
    series = fleet.instance_series(scrapes())
    out, width = bucketed(series, START, NOW, max_points=360)
    assert width == timedelta(seconds=10) and len(out) == 360
    assert out["ts"].iloc[0] == pd.Timestamp(START) and out["ts"].iloc[-1] == pd.Timestamp(NOW - width)
    spike = out[out["ts"] == pd.Timestamp(START + timedelta(minutes=40))]
    assert spike["kv_cache_usage"].iloc[0] == 0.97  # a mean would read 54%: under the limit it crossed
    down = out[(out["ts"] >= pd.Timestamp(GAP[0])) & (out["ts"] < pd.Timestamp(GAP[1]))]
    assert len(down) == 30 and down["kv_cache_usage"].isna().all()  # a gap, not a bridge
    assert out["kv_cache_usage"].notna().sum() == 330


def test_a_short_series_is_drawn_as_is_with_its_gap_broken() -> None:
    minutely = [s for s in scrapes() if s.scraped_at is not None and s.scraped_at.second == 0]
    series = fleet.instance_series(minutely)
    out, width = bucketed(series, START, NOW)
    assert width is None and out["kv_cache_usage"].notna().sum() == len(series) == 55
    assert out["kv_cache_usage"].isna().sum() == 1  # one break inside the five missing minutes


def test_bucketing_an_empty_gauge_gives_gaps_not_an_error() -> None:
    snaps = [s.model_copy(update={"queue": None}) for s in scrapes()]
    out, _ = bucketed(fleet.instance_series(snaps), START, NOW)
    assert out["queue"].isna().all() and not math.isnan(out["kv_cache_usage"].iloc[0])


def test_a_scrape_is_charted_as_scraped_not_as_a_decision_saw_it_with_its_requests_in_flight() -> None:
    # one scrape, stored as its round's snapshot and then as the states two decisions recorded on it
    # (queue + the requests the gateway had in flight): the chart is the instance's queue, 2
    rows = [InstanceSnapshot(instance="a", model="m", scraped_at=START + timedelta(seconds=s), queue=q)
            for s in range(3) for q in (2.0, 5.0, 7.0)]
    got = read_window(Store(rows), START, NOW, page=4)  # pages cut inside a scrape's rows too
    assert [s.queue for s in got.snapshots] == [2.0, 2.0, 2.0]
    assert list(fleet.instance_series(got.snapshots)["queue"]) == [2.0, 2.0, 2.0]
