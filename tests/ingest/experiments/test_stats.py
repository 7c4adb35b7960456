"""The pure statistics of a comparison, against published values and by simulation (seeded)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ingest.experiments.stats import (
    LogBins,
    benjamini_hochberg,
    bootstrap_quantile_diff,
    chi2_sf_1dof,
    has_enough_data,
    holm,
    mean_diff_interval,
    newcombe_interval,
    quantile_from_counts,
    srm_test,
    two_proportion_p,
    wilson_interval,
    z_for,
)

# Newcombe (1998), Statistics in Medicine 17:857, table I (Wilson score, "method 3") and table II
# (the hybrid score interval, "method 10"), to the four digits printed there.
WILSON = [((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)), ((0, 20), (0.0, 0.1611)),
          ((1, 29), (0.0061, 0.1718)), ((29, 29), (0.8830, 1.0))]
NEWCOMBE = [((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)),
            ((5, 56, 0, 29), (-0.0381, 0.1926))]


@pytest.mark.parametrize("case", WILSON, ids=[str(c[0]) for c in WILSON])
def test_wilson_matches_newcombe_table(case: tuple[tuple[int, int], tuple[float, float]]) -> None:
    (s, n), (lo, hi) = case
    got = wilson_interval(s, n)
    assert got == pytest.approx((lo, hi), abs=6e-5)


@pytest.mark.parametrize("case", NEWCOMBE, ids=[str(c[0]) for c in NEWCOMBE])
def test_newcombe_hybrid_matches_table(case: tuple[tuple[int, int, int, int], tuple[float, float]]) -> None:
    (s1, n1, s2, n2), (lo, hi) = case
    # the table gives p1 - p2; ours is b - a, so a is the second group
    got = newcombe_interval(s2, n2, s1, n1)
    assert got == pytest.approx((lo, hi), abs=6e-5)


def test_wilson_edges_and_bad_input() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and 0 < hi < 0.31
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    assert z_for(0.95) == pytest.approx(1.959964, abs=1e-6)


def test_wilson_and_newcombe_cover_about_95_percent() -> None:
    rng = np.random.default_rng(20261101)
    n, p, trials = 200, 0.08, 4000
    hits = rng.binomial(n, p, size=trials)
    covered = sum(lo <= p <= hi for lo, hi in (wilson_interval(int(s), n) for s in hits))
    assert 0.93 <= covered / trials <= 0.97
    a, b = rng.binomial(n, 0.10, size=trials), rng.binomial(n, 0.15, size=trials)
    intervals = (newcombe_interval(int(x), n, int(y), n) for x, y in zip(a, b, strict=True))
    covered = sum(lo <= 0.05 <= hi for lo, hi in intervals)
    assert 0.93 <= covered / trials <= 0.97


def test_mean_interval_covers_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(2000):
        x, y = rng.exponential(2.0, 300), rng.exponential(1.6, 300)
        lo, hi, _p = mean_diff_interval(x.mean(), x.var(ddof=1), 300, y.mean(), y.var(ddof=1), 300)
        covered += lo <= -0.4 <= hi
    assert 0.93 <= covered / 2000 <= 0.97
    assert mean_diff_interval(1.0, 0.0, 10, 1.0, 0.0, 10) == (0.0, 0.0, 1.0)


def test_bootstrap_quantile_interval_covers_and_agrees_with_a_plain_bootstrap() -> None:
    rng = np.random.default_rng(11)
    bins = LogBins()
    covered = 0
    truth = math.exp(5.0) * 0.1  # medians of lognormal(5, .5) and 1.1 × it
    for seed in range(300):
        a, b = rng.lognormal(5.0, 0.5, 400), 1.1 * rng.lognormal(5.0, 0.5, 400)
        _, _, lo, hi, _ = bootstrap_quantile_diff(bins.counts(a), bins.counts(b), bins, 0.5, replicates=400, seed=seed)
        covered += lo <= truth <= hi
    assert 0.90 <= covered / 300 <= 0.99
    # against a resampling bootstrap of the raw values
    a, b = rng.lognormal(5.0, 0.5, 500), rng.lognormal(5.0, 0.5, 500) * 1.2
    plain = [np.quantile(rng.choice(b, 500), 0.95) - np.quantile(rng.choice(a, 500), 0.95) for _ in range(2000)]
    _, _, lo, hi, p = bootstrap_quantile_diff(bins.counts(a), bins.counts(b), bins, 0.95, replicates=2000)
    ref_lo, ref_hi = np.quantile(plain, [0.025, 0.975])
    width = ref_hi - ref_lo
    assert abs(lo - ref_lo) < 0.1 * width and abs(hi - ref_hi) < 0.1 * width


def test_bootstrap_is_seeded_and_handles_degenerate_samples() -> None:
    bins = LogBins()
    rng = np.random.default_rng(3)
    ca, cb = bins.counts(rng.lognormal(4, 1, 1000)), bins.counts(rng.lognormal(4, 1, 1000))
    assert bootstrap_quantile_diff(ca, cb, bins, 0.5, seed=5) == bootstrap_quantile_diff(ca, cb, bins, 0.5, seed=5)
    same = bins.counts([5.0] * 200)
    a, b, lo, hi, p = bootstrap_quantile_diff(same, same, bins, 0.5)
    assert a == b and lo == hi == 0.0 and p == 1.0
    assert math.isnan(bootstrap_quantile_diff(same, np.zeros(bins.size, dtype=np.int64), bins, 0.5)[2])


def test_bins_bound_the_quantile_error() -> None:
    bins = LogBins()
    x = np.random.default_rng(1).lognormal(6, 1.2, 100_000)
    c = bins.counts(x)
    for q in (0.5, 0.95, 0.99):
        assert quantile_from_counts(c, bins, q) == pytest.approx(np.quantile(x, q), rel=bins.ratio - 1)
    assert bins.index([0.0, 0.05, 0.1, 1e12]).tolist() == [0, 0, 1, bins.k + 1]
    assert bins.from_sparse({3: 2, 3 + bins.k * 9: 1})[[3, bins.k + 1]].tolist() == [2, 1]


def test_srm_flags_55_45_on_a_50_50_design_and_not_50_50() -> None:
    assert srm_test(5500, 4500) < 0.001
    assert srm_test(5000, 5000) == 1.0
    assert srm_test(5030, 4970) > 0.01
    assert srm_test(5500, 4500, 0.55, 0.45) == pytest.approx(1.0)
    assert srm_test(0, 0) == 1.0
    # the closed form is the chi-square(1) survival function: P(X > 3.841) = 0.05
    assert chi2_sf_1dof(3.841459) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf_1dof(10.0) == pytest.approx(0.0015654, abs=1e-7)


def test_two_proportion_p() -> None:
    assert two_proportion_p(50, 1000, 50, 1000) == 1.0
    assert two_proportion_p(50, 1000, 80, 1000) == pytest.approx(0.0070, abs=5e-4)
    assert two_proportion_p(0, 0, 1, 2) == 1.0


def test_holm_is_step_down_and_monotone() -> None:
    out = holm({"cost": 0.001, "errors": 0.04, "latency": 0.012, "quality": 0.3})
    assert out["cost"] == (pytest.approx(0.004), True)
    assert out["latency"] == (pytest.approx(0.036), True)
    assert out["errors"] == (pytest.approx(0.08), False)  # 2 × 0.04; not significant once corrected
    assert out["quality"] == (pytest.approx(0.3), False)
    adjusted = [out[k][0] for k in sorted(out, key=lambda k: out[k][0])]
    assert adjusted == sorted(adjusted)
    # a p-value that is significant alone is not once three more metrics are read
    assert holm({"a": 0.03})["a"][1] and not holm({"a": 0.03, "b": 0.5, "c": 0.6, "d": 0.7})["a"][1]
    assert holm({}) == {}


def test_benjamini_hochberg() -> None:
    out = benjamini_hochberg({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    assert out["a"][0] == pytest.approx(0.04) and out["b"][0] == pytest.approx(0.04 * 4 / 3)
    assert [out[k][1] for k in "abcd"] == [True, False, False, False]


def test_minimum_sample_guard() -> None:
    assert has_enough_data(100, 100) and not has_enough_data(99, 1000) and has_enough_data(5, 5, minimum=5)
