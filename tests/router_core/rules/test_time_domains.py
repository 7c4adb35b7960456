"""A request time the request never has is a policy error, at the literal: the hour is 0-23, the weekday 0-6.

Before, ``request_time.hour in [9, 25]`` and ``request_time.hour > 30`` compiled, and ``policy check``
said ``ok``: a rule that can never match (or, with ``!=``, always does) passed silently.
"""

from __future__ import annotations

import pytest

from router_core.errors import PolicyError
from router_core.rules.condition import compile_condition
from router_core.rules.dsl import compile_dsl

HOUR, DAY = "request_time.hour is a whole number from 0 to 23", \
    "request_time.weekday is a whole number from 0 to 6 (Monday 0 .. Sunday 6)"


def _errors(text: str) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        compile_condition(text, source="p.yaml", line=4, col=16)
    return str(caught.value).splitlines()


@pytest.mark.parametrize(("text", "errors"), [
    ("request_time.hour in [9, 25]", [f"p.yaml:4:41: {HOUR}: it is never 25"]),
    ("request_time.hour in [24, 9, -1]",
     [f"p.yaml:4:38: {HOUR}: it is never 24", f"p.yaml:4:45: {HOUR}: it is never -1"]),
    ("request_time.hour == 9.5", [f"p.yaml:4:37: {HOUR}: it is never 9.5, so == 9.5 never holds"]),
    ("request_time.hour != 24", [f"p.yaml:4:37: {HOUR}: it is never 24, so != 24 always holds"]),
    ("request_time.hour not in [24]", [f"p.yaml:4:42: {HOUR}: it is never 24"]),
    ("request_time.weekday == 7", [f"p.yaml:4:40: {DAY}: it is never 7, so == 7 never holds"]),
    ("25 == request_time.hour", [f"p.yaml:4:16: {HOUR}: it is never 25, so == 25 never holds"]),
    ("request_time.hour > 30", [f"p.yaml:4:36: request_time.hour > 30 never holds: {HOUR}"]),
    ("request_time.hour >= 24", [f"p.yaml:4:37: request_time.hour >= 24 never holds: {HOUR}"]),
    ("request_time.weekday < 0", [f"p.yaml:4:39: request_time.weekday < 0 never holds: {DAY}"]),
    ("30 < request_time.hour", [f"p.yaml:4:16: request_time.hour > 30 never holds: {HOUR}"]),
    ("request_time.hour <= 30", [f"p.yaml:4:37: request_time.hour <= 30 always holds: {HOUR}"]),
    ("input_length > 8000 || request_time.hour > 30 && language == 'zh'",
     [f"p.yaml:4:59: request_time.hour > 30 never holds: {HOUR}"]),
])
def test_a_time_out_of_its_range_is_reported_at_the_literal(text: str, errors: list[str]) -> None:
    assert _errors(text) == errors


@pytest.mark.parametrize("text", [
    "request_time.hour in [0, 9, 23]", "request_time.weekday in [5, 6]", "request_time.hour == 9.0",
    "request_time.hour >= 18 && request_time.hour < 24", "request_time.hour > -1", "request_time.hour > 22.5",
    "request_time.hour >= 0", "request_time.weekday <= 6", "input_length > 30",
])
def test_times_in_range_and_the_bound_past_either_end_compile(text: str) -> None:
    assert compile_condition(text).text == text


def test_the_dsl_reports_it_too() -> None:
    with pytest.raises(PolicyError) as caught:
        compile_dsl('IF request_time.weekday in [5, 7] THEN route_to("m")', source="p.dsl")
    assert str(caught.value) == f"p.dsl:1:32: {DAY}: it is never 7"
