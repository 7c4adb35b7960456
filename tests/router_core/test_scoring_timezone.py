"""``scoring.timezone``: the profiles' hours are local hours there, read at the request's own time.

The shipped routelens.yaml routes in Asia/Shanghai; its profiles were read in UTC, so "night-quality"
ran through the Shanghai morning peak. The default stays UTC: a stored policy without the field
decides (and hashes) as before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from router_core.config_file import read_config
from router_core.decide.builtin import build_router
from router_core.decide.policy import policy_hash
from router_core.decide.replay import replay
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.trace import DecisionTrace
from schemas.yamlconf import parse_yaml_model
from tests.router_core.conftest import decide, healthy, make_config

SHIPPED = Path(__file__).resolve().parents[2] / "routelens.yaml"
SHANGHAI = ZoneInfo("Asia/Shanghai")
NIGHT = {"name": "night-quality", "hours": [0, 6], "weights": {"quality": 1.0, "latency": 0.0}}
PEAK = {"name": "peak-latency", "hours": [9, 12], "weights": {"quality": 0.0, "latency": 1.0}}


def shanghai(hour: int, minute: int = 0) -> datetime:
    """A UTC time that is ``hour:minute`` in Shanghai (UTC+8, no DST)."""
    return datetime(2026, 11, 30, hour, minute, tzinfo=SHANGHAI).astimezone(UTC)


def profile_of(trace: DecisionTrace) -> set[str]:
    """The profile the score steps name (``weight 0.4 (<profile>)``)."""
    return {s.reason.rsplit("(", 1)[1].rstrip(")") for s in trace.decision_trace if s.step.startswith("score/")}


@pytest.mark.parametrize(("hour", "minute", "expected"), [
    (10, 30, "peak-latency"),  # the seed's morning peak
    (15, 0, "peak-latency-pm"),  # the afternoon peak band
    (3, 0, "night-quality"),  # the low-traffic night
    (20, 0, "balanced"),  # evening: the preset
    (7, 0, "balanced"),
])
def test_the_shipped_profiles_follow_shanghai_hours(hour: int, minute: int, expected: str) -> None:
    policy = build_router(read_config(SHIPPED)).policy
    assert policy.weights_at(shanghai(hour, minute))[0] == expected


def test_the_shipped_night_profile_is_not_in_force_in_the_morning_peak() -> None:
    policy = build_router(read_config(SHIPPED)).policy
    morning = [policy.weights_at(shanghai(h, 30))[0] for h in range(9, 12)]
    assert "night-quality" not in morning and policy.weights_at(shanghai(10, 30))[1]["latency"] == 0.45


def test_the_trace_names_the_local_profile_and_replay_reads_the_trace_time() -> None:
    cfg = make_config(scoring={"preset": "balanced", "timezone": "Asia/Shanghai", "profiles": [NIGHT, PEAK]})
    _, trace = decide(healthy(), cfg, now=shanghai(10, 30))  # 02:30 UTC: NIGHT's hours in UTC
    assert profile_of(trace) == {"peak-latency"}
    again = replay(trace, cfg)  # no clock: the trace's ts is the request's time
    assert profile_of(again.trace) == {"peak-latency"}
    assert [s.reason for s in again.trace.decision_trace if s.step.startswith("score/")] == \
        [s.reason for s in trace.decision_trace if s.step.startswith("score/")]
    _, night = decide(healthy(), cfg, now=shanghai(3))
    assert profile_of(night) == {"night-quality"}


def test_without_a_timezone_profiles_read_utc_hours_as_before() -> None:
    cfg = make_config(scoring={"preset": "balanced", "profiles": [NIGHT, PEAK]})
    policy = build_router(cfg).policy
    assert policy.weights_at(shanghai(10, 30))[0] == "night-quality"  # 02:30 UTC
    assert policy.weights_at(datetime(2026, 11, 30, 10, 30, tzinfo=UTC))[0] == "peak-latency"
    explicit = make_config(scoring={"preset": "balanced", "profiles": [NIGHT, PEAK], "timezone": "UTC"})
    assert policy_hash(explicit) == policy_hash(cfg)  # a stored policy keeps its hash
    assert policy_hash(make_config(scoring={"preset": "balanced", "profiles": [NIGHT, PEAK],
                                            "timezone": "Asia/Shanghai"})) != policy_hash(cfg)


def test_a_zone_with_daylight_saving_reads_the_local_hour_on_each_side() -> None:
    cfg = make_config(scoring={"preset": "balanced", "timezone": "Europe/Berlin", "profiles": [PEAK]})
    policy = build_router(cfg).policy
    assert policy.weights_at(datetime(2026, 1, 15, 9, 30, tzinfo=UTC))[0] == "peak-latency"  # 10:30 CET
    assert policy.weights_at(datetime(2026, 7, 15, 9, 30, tzinfo=UTC))[0] == "peak-latency"  # 11:30 CEST
    assert policy.weights_at(datetime(2026, 7, 15, 10, 30, tzinfo=UTC))[0] == "balanced"  # 12:30 CEST


def test_an_unknown_zone_is_one_line_naming_the_field() -> None:
    text = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:1'}\nscoring:\n  timezone: Mars/Base\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "r.yaml")
    message = str(info.value)
    assert "scoring.timezone" in message and "unknown time zone 'Mars/Base'" in message
    assert "Traceback" not in message

