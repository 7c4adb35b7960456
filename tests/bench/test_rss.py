"""The soak's memory figures (bench/rss.py): growth after warm-up, the second half's slope, restarts."""

from __future__ import annotations

import os

import pytest

from bench import rss
from bench.rss import RssCurve, slope_per_min


def test_slope_is_mb_per_minute_and_needs_three_points() -> None:
    assert slope_per_min([(0, 100.0), (60, 101.0), (120, 102.0)]) == pytest.approx(1.0)
    assert slope_per_min([(0, 100.0), (30, 100.0), (60, 100.0), (90, 100.0)]) == pytest.approx(0.0)
    assert slope_per_min([(0, 100.0), (60, 101.0)]) is None


def test_a_rise_that_levels_off_has_growth_but_no_slope(monkeypatch: pytest.MonkeyPatch) -> None:
    level = iter([100, 110, 118, 120, 120, 120, 120, 120, 120, 120])
    monkeypatch.setattr(rss, "rss_mb", lambda pid: float(next(level)))
    curve = RssCurve()
    for i in range(10):
        curve.sample(i * 30.0, {"gateway": [1]})
    assert curve.growth(60.0) == {"gateway": 2.0}  # from the sample at 60 s (118 MB) to the last
    assert curve.slopes(150.0) == {"gateway": 0.0}
    assert curve.curve(3) == {"gateway": [100.0, 120.0, 120.0]}


def test_a_restarted_process_is_read_from_its_restart_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rss, "rss_mb", lambda pid: 50.0 + pid)
    curve = RssCurve()
    for i in range(8):
        curve.sample(i * 10.0, {"store": [1 if i < 4 else 2], "sim": [7]})
    assert curve.growth(20.0) == {"sim": 0.0}  # the store restarted after warm-up: no growth across it
    assert curve.slopes(0.0) == {"store": 0.0, "sim": 0.0}  # the store's: its four samples since the restart


def test_a_gone_process_is_not_sampled() -> None:
    curve = RssCurve()
    curve.sample(0.0, {"me": [os.getpid()], "gone": [2**22 + 7]})
    assert set(curve.samples) == {"me"} and curve.samples["me"][0][1] > 0
