"""The inverse-propensity estimate on logged traffic whose answer is known (seeded simulation)."""

from __future__ import annotations

import numpy as np
import pytest

from ingest.experiments.ips import ips_estimate, ips_report


def _logged(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A live picker that serves instance 1 with probability 0.3 (cost 2, misroute 10%) and instance 0
    otherwise (cost 1, misroute 30%)."""
    rng = np.random.default_rng(seed)
    one = rng.random(n) < 0.3
    logged = np.where(one, 0.3, 0.7)
    cost = np.where(one, 2.0, 1.0) + rng.normal(0, 0.2, n)
    misroute = (rng.random(n) < np.where(one, 0.1, 0.3)).astype(float)
    return one, logged, cost, misroute


def test_a_deterministic_candidate_is_estimated_from_its_matches() -> None:
    one, logged, cost, misroute = _logged(20_000)
    est = ips_report(logged, one, cost, misroute)  # the candidate always serves instance 1
    c, m = est["cost_per_request"], est["misroute_rate"]
    assert c.value is not None and c.ci is not None and c.ci[0] <= 2.0 <= c.ci[1]
    assert m.value is not None and m.ci is not None and m.ci[0] <= 0.1 <= m.ci[1]
    assert c.matched == int(one.sum()) and c.logged_mean == pytest.approx(cost.mean())
    assert c.effective_n == pytest.approx(c.matched)


def test_a_stochastic_candidate_and_the_interval_coverage() -> None:
    covered = 0
    for seed in range(200):
        _, logged, cost, _ = _logged(2000, seed)
        est = ips_estimate(logged, np.full(2000, 0.5), cost)  # 50/50 between the instances: mean cost 1.5
        assert est.ci is not None
        covered += est.ci[0] <= 1.5 <= est.ci[1]
    assert 0.91 <= covered / 200 <= 0.99


def test_missing_rewards_and_propensities_are_left_out_and_too_few_matches_give_no_value() -> None:
    logged = np.array([0.5, np.nan, 0.5, 0.0, 0.5])
    reward = np.array([1.0, 1.0, np.nan, 1.0, 0.0])
    est = ips_estimate(logged, np.ones(5), reward, min_matched=2)
    assert est.n == 2 and est.value == pytest.approx(0.5)
    none = ips_estimate(logged, np.zeros(5), reward)
    assert none.value is None and none.ci is None and "not enough data" in (none.note or "")
    with pytest.raises(ValueError):
        ips_estimate([0.5], [1.5], [1.0])
    with pytest.raises(ValueError):
        ips_estimate([0.5, 0.5], [1.0], [1.0])


def test_traces_without_a_selection_probability_are_said_to_carry_none() -> None:
    """An audit found "not enough data: 0 logged requests match" over traces written before the probability
    was recorded: the note says the real reason."""
    cost, misroute = np.ones(4), np.zeros(4)
    est = ips_report(np.array([]), np.array([]), np.array([]), np.array([]), unlogged=244)
    for e in est.values():
        assert e.value is None and e.n == 0
        assert e.note == ("the traces carry no selection probability: none of the 244 requests has one "
                          "(written before RouteLens recorded it, or served by a retry)")
    nan = ips_estimate(np.full(4, np.nan), np.ones(4), cost)  # NaN: not logged either
    assert (nan.note or "").startswith("the traces carry no selection probability: none of the 4 requests")
    few = ips_report(np.full(4, 0.5), np.ones(4), cost, misroute, unlogged=10)["cost_per_request"]
    assert few.note == "not enough data: 4 logged requests match the candidate (need 30); " \
                       "10 more carry no selection probability"
