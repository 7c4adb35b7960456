"""The three hour-range fields read hours one way: ``[start, end)``, start 0-23, end 0-24, start > end wraps.

``routing.peak_hours``, ``scoring.profiles[].hours`` and ``economics.budgets.bands[].hours``: a
range that never applies is refused at load with file, line and field; a wrap is accepted by all.
"""

from __future__ import annotations

import pytest

from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.yamlconf import parse_yaml_model

FLEET = "fleet:\n  instances:\n    - {id: a, model: m, url: 'http://127.0.0.1:1'}\n"
PLACES = {
    "peak_hours": ("routing:\n  peak_hours: [{r}]\n", "c.yaml:5: routing.peak_hours[0]"),
    "profile": ("scoring:\n  profiles:\n    - {{name: p, hours: {r}, weights: {{cost: 1}}}}\n",
                "c.yaml:6: scoring.profiles[0].hours"),
    "band": ("economics:\n  budgets:\n    bands:\n      - {{name: n, hours: [{r}], max_share: 0.1}}\n",
             "c.yaml:7: economics.budgets.bands[0].hours[0]"),
}


def _load(place: str, hours: str) -> RouteLensConfig:
    return parse_yaml_model(RouteLensConfig, FLEET + PLACES[place][0].format(r=hours), "c.yaml")


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("hours", ["[24, 0]", "[24, 6]", "[5, 5]", "[0, 25]", "[-1, 4]"])
def test_a_range_that_never_applies_is_refused_naming_file_line_and_field(place: str, hours: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(place, hours)
    text = str(info.value)
    assert PLACES[place][1] in text and "never applies" in text and "start > end wraps midnight" in text, text


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("hours", ["[22, 6]", "[0, 24]", "[23, 24]", "[18, 0]"])
def test_every_range_that_applies_is_accepted_wraps_included(place: str, hours: str) -> None:
    _load(place, hours)


@pytest.mark.parametrize("window", ["5000", "1.5", "86399"])
def test_a_budget_window_that_does_not_divide_a_day_is_refused(window: str) -> None:
    text = FLEET + "economics:\n  budgets:\n    bands:\n      - {name: n, hours: [[0, 24]], max_share: 0.1, " \
        f"window_s: {window}}}\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml_model(RouteLensConfig, text, "c.yaml")
    assert "c.yaml:7: economics.budgets.bands[0].window_s" in str(info.value)
    assert "does not divide a day" in str(info.value)


@pytest.mark.parametrize("window", ["900", "1800", "3600", "21600", "86400"])
def test_a_budget_window_dividing_a_day_is_accepted(window: str) -> None:
    text = FLEET + "economics:\n  budgets:\n    bands:\n      - {name: n, hours: [[0, 24]], max_share: 0.1, " \
        f"window_s: {window}}}\n"
    (band,) = parse_yaml_model(RouteLensConfig, text, "c.yaml").economics.budgets.bands
    assert band.window_s == float(window)
