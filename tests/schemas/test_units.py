"""Durations, sizes and time zones as configuration writes them."""

from __future__ import annotations

import pytest

from schemas.units import check_zone, format_bytes, parse_bytes, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [("1500ms", 1.5), ("10s", 10.0), ("2m", 120.0), ("1h", 3600.0),
                                                (" 0.5 s ", 0.5), (3, 3.0), (0.25, 0.25)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["soon", "10 sec", "-1s", True, "1e999s", None])
def test_bad_durations(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


@pytest.mark.parametrize(("text", "size"), [("12GB", 12 * 2**30), ("512MiB", 512 * 2**20), ("1.5KB", 1536), (7, 7)])
def test_sizes_are_binary(text: object, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize("bad", ["12 gigs", "-1GB", 1.5, False])
def test_bad_sizes(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_bytes(bad)


def test_zones() -> None:
    assert check_zone("Asia/Shanghai") == "Asia/Shanghai"
    for bad in ("Mars/Base", "", "../etc/passwd"):
        with pytest.raises(ValueError, match="unknown time zone"):
            check_zone(bad)


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 5 * 2**20 + 12345, 3 * 2**30, 2**41])
def test_format_bytes_reads_back_through_parse_bytes_within_its_rounding(n: int) -> None:
    shown = format_bytes(n)
    back = parse_bytes(shown.replace(" bytes", "B").replace(" ", ""))
    assert abs(back - n) <= 0.05 * n
