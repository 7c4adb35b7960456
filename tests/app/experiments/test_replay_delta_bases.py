"""replay's cost and latency blocks: which requests each figure is over, and enough to recompute one from another.

An audit found ``new_mean - old_mean != delta_mean`` with nothing saying why: the two means are over
the flipped requests only, ``delta_mean`` over every request the delta is known for. The block now
carries ``flipped`` (the means' base) and its schema says which figure is over which requests.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from app.experiments.replay_range import replay_range
from bench.replay_traces import fleet_config
from schemas.queries import TraceFilter
from schemas.replay_report import PredictedDelta
from tests.app.experiments.seed import T0, decided, store_traces


def test_the_means_are_over_the_flips_and_the_delta_over_all_the_requests(tmp_path: Path) -> None:
    db = store_traces(tmp_path / "traces.duckdb", decided(300))
    report = replay_range(db, T0, T0 + timedelta(days=1), TraceFilter(),
                          fleet_config())  # another preset: flips among the stored candidates
    assert 0 < report.flips < report.replayed
    for block in (report.cost, report.latency):
        assert 0 < block.flipped <= report.flips and block.flipped < block.requests <= report.replayed
        assert block.old_mean is not None and block.new_mean is not None and block.delta_mean is not None
        assert block.delta_total == pytest.approx((block.new_mean - block.old_mean) * block.flipped)
        assert block.delta_mean == pytest.approx(block.delta_total / block.requests)
        assert block.delta_mean != pytest.approx(block.new_mean - block.old_mean)  # the two bases differ
    assert report.model_dump(mode="json")["cost"]["flipped"] == report.cost.flipped  # in --json too


def test_the_schema_says_what_each_figure_is_over() -> None:
    said = {name: f.description or "" for name, f in PredictedDelta.model_fields.items()}
    assert "flipped requests only" in said["old_mean"] and "flipped requests only" in said["new_mean"]
    assert "unflipped" in said["requests"] and "delta_total / requests" in said["delta_mean"]
    assert "old_mean and new_mean" in said["flipped"]
