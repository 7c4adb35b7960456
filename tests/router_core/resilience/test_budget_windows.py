"""Budget windows follow the local clock of ``economics.budgets.timezone``, not UTC epoch multiples.

A window of a day is the local date (reset at local midnight; 23 or 25 hours on a DST day); a
shorter one starts at local midnight + k * window_s of wall time. Bands' hours may wrap midnight.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from router_core.resilience.budgets import BudgetTracker, window_at
from router_core.shared.base import MemoryShared
from schemas.config.economics import BudgetSettings

SHANGHAI, KOLKATA, NEW_YORK = ZoneInfo("Asia/Shanghai"), ZoneInfo("Asia/Kolkata"), ZoneInfo("America/New_York")


def _tracker(zone: str, window_s: int, hours: list[list[int]] | None = None) -> BudgetTracker:
    band = {"name": "b", "hours": hours or [[0, 24]], "max_spend": 10.0, "window_s": window_s}
    return BudgetTracker(BudgetSettings(timezone=zone, bands=[band]), MemoryShared(clock=lambda: 0.0))


def _uses(tracker: BudgetTracker, times: list[datetime]) -> list[float]:
    """Spend 4 (of 10) at each time; the use seen right after each."""
    async def run() -> list[float]:
        out = []
        for t in times:
            tracker.record("m", 4.0, t)
            out.append(round(tracker.view(t).use, 6))
        await asyncio.sleep(0)
        return out

    return asyncio.run(run())


def test_a_daily_window_resets_at_local_midnight_not_utc_midnight() -> None:
    day = [datetime(2026, 6, 3, h, m, tzinfo=SHANGHAI) for h, m in [(0, 10), (7, 50), (8, 10), (23, 50)]]
    next_day = datetime(2026, 6, 4, 0, 10, tzinfo=SHANGHAI)  # 16:10 UTC of the same UTC day
    assert _uses(_tracker("Asia/Shanghai", 86_400), [*day, next_day]) == [0.4, 0.8, 1.2, 1.6, 0.4]


def test_an_hourly_window_starts_on_the_local_hour_in_a_half_hour_zone() -> None:
    times = [datetime(2026, 6, 3, 10, m, tzinfo=KOLKATA) for m in (5, 25, 35, 59)]
    times.append(datetime(2026, 6, 3, 11, 0, tzinfo=KOLKATA))
    assert _uses(_tracker("Asia/Kolkata", 3600), times) == [0.4, 0.8, 1.2, 1.6, 0.4]


@pytest.mark.parametrize(("day", "hours"), [((2026, 3, 8), 23), ((2026, 11, 1), 25), ((2026, 6, 3), 24)],
                         ids=["spring-forward", "fall-back", "plain"])
def test_a_daily_window_is_the_local_date_however_long(day: tuple[int, int, int], hours: int) -> None:
    first, last = datetime(*day, 0, 0, tzinfo=NEW_YORK), datetime(*day, 23, 59, tzinfo=NEW_YORK)
    w = window_at(first, 86_400, NEW_YORK)
    assert w.id == window_at(last, 86_400, NEW_YORK).id == f"{day[0]}-{day[1]:02d}-{day[2]:02d}"
    assert (w.start, w.end - w.start) == (first.timestamp(), hours * 3600)
    assert window_at(first - timedelta(seconds=1), 86_400, NEW_YORK).id != w.id


def test_at_fall_back_the_repeated_wall_hour_is_one_hourly_window() -> None:
    first = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT; an hour later 01:30 EST
    assert first.astimezone(NEW_YORK).hour == (first + timedelta(hours=1)).astimezone(NEW_YORK).hour == 1
    assert window_at(first, 3600, NEW_YORK).id == window_at(first + timedelta(hours=1), 3600, NEW_YORK).id
    assert _uses(_tracker("America/New_York", 3600), [first, first + timedelta(hours=1)]) == [0.4, 0.8]


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Asia/Shanghai"])
@pytest.mark.parametrize("day", [(2026, 3, 8), (2026, 4, 5), (2026, 10, 4), (2026, 11, 1)])
def test_the_cached_window_is_the_local_wall_time_window_at_every_instant(zone: str, day: tuple[int, int, int]) -> None:
    # Around every DST change of these zones (Lord Howe shifts by 30 minutes); 37 s steps over 26 h.
    tz = ZoneInfo(zone)
    trackers = {w: _tracker(zone, w) for w in (900, 1800, 3600, 7200, 21_600, 86_400)}
    t = datetime(*day, tzinfo=tz).astimezone(UTC) - timedelta(hours=1)
    for _ in range(26 * 3600 // 37):
        local = t.astimezone(tz)
        wall = local.hour * 3600 + local.minute * 60 + local.second
        for w, tracker in trackers.items():
            want = local.date().isoformat() + ("" if w == 86_400 else f"/{wall // w}")
            (band,) = tracker.settings.bands
            assert tracker.window(band, t).id == want, (zone, w, t)
        t += timedelta(seconds=37)


def test_the_window_bounds_are_cached_and_recomputed_when_now_leaves_them() -> None:
    tracker = _tracker("Asia/Kolkata", 3600)
    (band,) = tracker.settings.bands
    t = datetime(2026, 6, 3, 10, 5, tzinfo=KOLKATA)
    w = tracker.window(band, t)
    assert (w.start, w.end) == (t.replace(minute=0).timestamp(), t.replace(hour=11, minute=0).timestamp())
    assert tracker.window(band, t.replace(minute=59)) is w  # no recomputation inside
    assert tracker.window(band, t.replace(hour=11, minute=0)).id == "2026-06-03/11"


def test_a_band_wrapping_midnight_holds_the_hours_on_both_sides() -> None:
    settings = BudgetSettings(timezone="Asia/Shanghai", bands=[
        {"name": "night", "hours": [[22, 6]], "max_share": 0.1},
        {"name": "day", "hours": [[6, 22]], "max_share": 0.2}])
    tracker = BudgetTracker(settings, MemoryShared(clock=lambda: 0.0))
    bands = {h: (b.name if (b := tracker.band_at(datetime(2026, 6, 3, h, tzinfo=SHANGHAI))) else None)
             for h in (21, 22, 23, 0, 5, 6)}
    assert bands == {21: "day", 22: "night", 23: "night", 0: "night", 5: "night", 6: "day"}
