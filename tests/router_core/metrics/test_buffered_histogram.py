"""BufferedHistogram: the same exposition as prometheus_client's Histogram for the same observations."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from router_core.metrics import buffered_histogram
from router_core.metrics.buffered_histogram import BufferedHistogram

BUCKETS = (1e-6, 5e-6, 2e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 5e-3)


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples if not s.name.endswith("_created")}


def test_the_exposition_matches_a_plain_histogram_including_values_on_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffered_histogram, "FOLD_AT", 64)  # some folds happen on observe, the rest on collect
    rng = random.Random(7)
    values = [rng.choice([*BUCKETS, 0.0, 1.0]) if rng.random() < 0.2 else rng.lognormvariate(-10, 2)
              for _ in range(1000)]
    plain_reg, ours_reg = CollectorRegistry(), CollectorRegistry()
    plain = Histogram("t_seconds", "t", ["p"], buckets=BUCKETS, registry=plain_reg)
    ours = BufferedHistogram("t_seconds", "t", ["p"], buckets=BUCKETS, registry=ours_reg)
    observe_a, observe_b = ours.observer("a"), ours.observer("b")
    for i, v in enumerate(values):
        (plain.labels("a") if i % 3 else plain.labels("b")).observe(v)
        (observe_a if i % 3 else observe_b)(v)
    got, want = samples(ours_reg), samples(plain_reg)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert abs(got[key] - value) <= 1e-9 * max(1.0, abs(value)), key
    assert generate_latest(ours_reg).count(b"t_seconds_bucket") == 2 * (len(BUCKETS) + 1)


def test_a_new_series_is_exposed_empty_and_a_wrong_label_count_is_refused() -> None:
    registry = CollectorRegistry()
    hist = BufferedHistogram("u_seconds", "u", ["x", "y"], buckets=BUCKETS, registry=registry)
    hist.observer("1", "2")
    assert registry.get_sample_value("u_seconds_count", {"x": "1", "y": "2"}) == 0.0
    with pytest.raises(ValueError, match="2 label values"):
        hist.observer("only-one")
