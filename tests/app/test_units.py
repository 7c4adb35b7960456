"""How numbers read on the pages: units, value / limit, plurals, no None."""

from __future__ import annotations

import math

import pytest

from app.units import DASH, count, fmt, fmt_apart, fmt_delta, over_limit

CASES = [
    (0.123, "%", "12%"), (0.0123, "%", "1.2%"), (0.0, "%", "0%"), (0.85, "%", "85%"),
    (38.7263, "ms", "39 ms"), (4.25, "ms", "4.2 ms"), (1234.5, "ms", "1,234 ms"),
    (2.5, "req/s", "2.5 requests/s"), (40.2, "req/s", "40 requests/s"),
    (1.0, "requests", "1 request"), (12.0, "requests", "12 requests"),
    (3.14159, "cost", "3.14 credits"), (0.0012, "cost", "0.0012 credits"),
    (0.123456, "score", "0.123"), (None, "ms", DASH), (math.nan, "%", DASH),
]


@pytest.mark.parametrize(("value", "unit", "text"), CASES, ids=[f"{c[1]}-{c[2]}" for c in CASES])
def test_fmt(value: float | None, unit: str, text: str) -> None:
    assert fmt(value, unit, "credits") == text  # type: ignore[arg-type]


def test_value_over_limit_in_one_unit() -> None:
    assert over_limit(0.92, 0.85, "%") == "92% / 85%"
    assert over_limit(12, 10, "requests") == "12 / 10 requests"
    assert over_limit(6.0912, 10, "requests") == "6.1 / 10 requests"  # a gauge averaged over a scrape
    assert over_limit(None, 10, "requests") == f"{DASH} / 10 requests"
    assert over_limit(840.4, 3000, "ms") == "840 ms / 3,000 ms"
    assert over_limit(0.5, None, "%") == "50%"


def test_deltas_and_plurals() -> None:
    assert fmt_delta(0.012, "%") == "+1.2 pp"
    assert fmt_delta(-40.0, "ms") == "−40 ms"
    assert fmt_delta(None, "ms") is None
    assert count(1, "decision") == "1 decision"
    assert count(0, "decision") == "0 decisions"
    assert count(2400, "removal") == "2,400 removals"


@pytest.mark.parametrize(("a", "b", "unit", "expected"), [
    (0.93, 0.85, "%", ("93%", "85%")), (0.8512, 0.85, "%", ("85.1%", "85.0%")), (0.85, 0.85, "%", ("85%", "85%")),
    (800.4, 800.0, "ms", ("800.4 ms", "800.0 ms")), (None, 0.85, "%", (DASH, "85%")),
    (10.04, 10.01, "n", ("10.04", "10.01")),
])
def test_fmt_apart_never_reads_two_numbers_the_same(a: float | None, b: float, unit: str,
                                                    expected: tuple[str, str]) -> None:
    assert fmt_apart(a, b, unit) == expected  # type: ignore[arg-type]
