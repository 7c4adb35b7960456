"""Cost and latency as ``compare`` gives them add up with the Overview's and the series' figures, on every backend.

Cost per request is the side's cost sum (what the Overview sums, forced requests left out) over all
its requests: a request no instance served carries no cost and counts 0. It was the mean over the
costed requests only, so ``mean × n`` was not the side's sum and the series' cost per request (sum
over requests) disagreed with the table's. Latency p50/p95 are the requests' own quantiles
(``quantile_cont``, as the Overview over traces): they were read at rank ``q·n`` from 4,000 log bins,
several percent off at a few dozen requests.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from schemas import DecisionTrace, OutcomeStatus
from schemas.experiments import CompareQuery
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.experiments.experiment_data import END, T0, experiment, forced
from tests.quantile import quantile


def _unserved(t: DecisionTrace) -> DecisionTrace:
    """No instance answered: an error without a cost."""
    outcome = t.outcome.model_copy(update={"status": OutcomeStatus.ERROR, "http_status": 503, "cost": None})
    return t.model_copy(update={"outcome": outcome})


SERVED, _ = experiment(40, 40)
TRACES = [_unserved(t) if i % 7 == 3 else t for i, t in enumerate(SERVED)]
FORCED, _ = forced({"a": 3, "b": 2})
QUERY = CompareQuery(a="a", b="b", start=T0, end=END)


@pytest.fixture(params=["duckdb", "elasticsearch-contract"], scope="module")
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "duckdb":
        s: Any = DuckDBTraceStore(Path(tmp_path_factory.mktemp("db")) / "t.duckdb")
        s.write_records([*TRACES, *FORCED])
        yield s
        s.close()
        return
    with ContractServer() as server:
        s = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        s.write_records([*TRACES, *FORCED])
        yield s
        s.close()
    assert server.violations == []


def _side(arm: str) -> list[DecisionTrace]:
    return [t for t in TRACES if t.experiment_arm == arm]


def test_cost_per_request_is_the_sides_sum_over_its_requests_as_the_overview_and_series_add_it_up(
        store: Any) -> None:
    report = store.compare(QUERY)
    cost = report.metrics["cost_per_request"]
    series = store.experiment_series("arm", "a", "b", AggregateQuery(filter=TraceFilter(start=T0, end=END),
                                                                     bucket="15m"))
    for arm in ("a", "b"):
        side = _side(arm)
        assert any(t.outcome.cost is None for t in side)  # the case that told the two means apart
        total = sum(t.outcome.cost or 0.0 for t in side)
        mean = getattr(cost, arm)
        assert mean == pytest.approx(total / len(side), rel=1e-12)
        assert mean * getattr(report, f"n_{arm}") == pytest.approx(sum(b.cost for b in series[arm]), rel=1e-12)
        overview = store.aggregate(AggregateQuery(filter=TraceFilter(start=T0, end=END, experiment_arm=arm),
                                                  bucket="1d"))
        forced_cost = sum(t.outcome.cost or 0.0 for t in FORCED if t.experiment_arm == arm)
        assert sum(b.cost for b in overview) - forced_cost == pytest.approx(total, rel=1e-12)
    assert (cost.n_a, cost.n_b) == (report.n_a, report.n_b) == (40, 40)
    assert cost.note is not None and "every request" in cost.note and "count 0" in cost.note


@pytest.mark.parametrize(("metric", "q"), [("latency_p50_ms", 0.5), ("latency_p95_ms", 0.95)])
def test_latency_quantiles_are_the_requests_own_as_the_overview_computes_them(store: Any, metric: str,
                                                                             q: float) -> None:
    m = store.compare(QUERY).metrics[metric]
    want = {arm: quantile([t.outcome.total_ms for t in _side(arm)], q) for arm in ("a", "b")}
    assert (m.a, m.b) == (pytest.approx(want["a"], rel=1e-9), pytest.approx(want["b"], rel=1e-9))
    assert m.delta == pytest.approx(want["b"] - want["a"], rel=1e-9, abs=1e-9)
    assert m.ci is not None and m.ci[0] <= m.delta <= m.ci[1]  # the interval is moved onto the point
    assert m.note is not None and m.note.startswith("the requests' own quantile")


def test_the_cost_interval_is_welchs_over_every_request(store: Any) -> None:
    cost = store.compare(QUERY).metrics["cost_per_request"]
    var = {arm: statistics.variance([t.outcome.cost or 0.0 for t in _side(arm)]) for arm in ("a", "b")}
    half = statistics.NormalDist().inv_cdf(0.975) * math.sqrt(var["a"] / 40 + var["b"] / 40)
    assert cost.ci is not None and cost.delta is not None
    # exact on DuckDB; from the percentile grid's second moment on Elasticsearch
    assert (cost.ci[1] - cost.ci[0]) / 2 == pytest.approx(half, rel=0.03)
    assert cost.ci[0] + half == pytest.approx(cost.delta, rel=0.03, abs=0.01)
