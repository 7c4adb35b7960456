"""An aware time in any zone decides as its instant does: the profile's hour, the age of a state.

A trace read back from a store carried its ``ts`` and ``scraped_at`` in the zone of the machine
that read it (``America/New_York``), and the router read ``now.hour`` of that zone for the UTC
profiles, and subtracted two New York wall clocks for a state's age (an hour off across a DST
change, and negative across the autumn one). Each case here is the same instant in several zones.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import TypeAdapter

from router_core.decide.builtin import build_router
from router_core.state.staleness import effective_state
from schemas.config import ScrapeSettings
from tests.router_core.conftest import decide, healthy, make_config

NEW_YORK = ZoneInfo("America/New_York")
NIGHT = {"name": "night-quality", "hours": [0, 6], "weights": {"quality": 1.0, "latency": 0.0}}


def in_zones(when: datetime) -> list[datetime]:
    """``when`` (UTC) as read in New York, Kolkata, ZoneInfo UTC, +08:00, parsed JSON (pydantic's zone), naive UTC."""
    parsed = TypeAdapter(datetime).validate_json(f'"{when.isoformat()}"')
    return [when.astimezone(NEW_YORK), when.astimezone(ZoneInfo("Asia/Kolkata")), when.astimezone(ZoneInfo("UTC")),
            when.astimezone(timezone(timedelta(hours=8))), parsed, when.replace(tzinfo=None), when]


@pytest.mark.parametrize(("when", "expected"), [
    (datetime(2026, 6, 3, 3, 0, tzinfo=UTC), "night-quality"),  # 23:00 the day before in New York
    (datetime(2026, 6, 3, 12, 0, tzinfo=UTC), "balanced"),  # 21:00 in Shanghai, 08:00 in New York
    (datetime(2026, 11, 1, 5, 30, tzinfo=UTC), "night-quality"),  # 01:30 EDT, the hour New York repeats
])
def test_utc_profiles_read_the_utc_hour_of_the_instant(when: datetime, expected: str) -> None:
    policy = build_router(make_config(scoring={"preset": "balanced", "profiles": [NIGHT]})).policy
    assert [policy.weights_at(at)[0] for at in in_zones(when)] == [expected] * 7
    assert {policy.scoring_hour(at) for at in in_zones(when)} == {when.hour}


def test_zoned_profiles_read_the_local_hour_of_the_instant() -> None:
    cfg = make_config(scoring={"preset": "balanced", "profiles": [NIGHT], "timezone": "America/New_York"})
    policy = build_router(cfg).policy
    assert {policy.scoring_hour(at) for at in in_zones(datetime(2026, 6, 3, 3, 0, tzinfo=UTC))} == {23}


# (scraped, decided): 2 s apart across New York's DST changes; their wall clocks differ by 3602 s
# in spring and by -3598 s in autumn.
ACROSS_DST = [(datetime(2026, 3, 8, 6, 59, 59, tzinfo=UTC), datetime(2026, 3, 8, 7, 0, 1, tzinfo=UTC)),
              (datetime(2026, 11, 1, 5, 59, 59, tzinfo=UTC), datetime(2026, 11, 1, 6, 0, 1, tzinfo=UTC))]


@pytest.mark.parametrize(("scraped", "now"), ACROSS_DST, ids=["spring", "autumn"])
@pytest.mark.parametrize("zone", [NEW_YORK, ZoneInfo("UTC"), UTC], ids=["new-york", "zoneinfo-utc", "utc"])
def test_a_state_age_is_the_time_elapsed_since_the_scrape(scraped: datetime, now: datetime, zone: object) -> None:
    assert isinstance(zone, ZoneInfo | timezone)
    at, decided = scraped.astimezone(zone), now.astimezone(zone)  # both in one zone, as a store read gives them
    state = {iid: s.model_copy(update={"scraped_at": at, "age_s": None}) for iid, s in healthy().items()}
    _, trace = decide(state, now=decided)
    assert {c.state.age_s for c in trace.candidates if c.state is not None} == {2.0}
    scrape = ScrapeSettings()
    eff = effective_state(state["big-a"], decided, scrape, 10.0)
    assert eff.age_s == 2.0 and not eff.suspect
    # A time in another zone than the state's: the same answer.
    assert effective_state(state["big-a"], now, scrape, 10.0).age_s == 2.0
