"""``compare`` and ``experiment_groups`` on every backend: DuckDB (a real file), DuckDB behind the HTTP
API, and Elasticsearch through the contract server. Expected values are computed from the models."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.errors import SinkError
from ingest.http_api.client import HttpTraceStore
from schemas.experiments import METRICS, CompareQuery
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.experiments.experiment_data import END, POLICY, T0, VERSION, experiment, forced
from tests.ingest.test_trace_store import served

N = 600
TRACES, FEEDBACK = experiment(N, N)
FORCED = {"a": 7, "b": 12}  # requests forced onto each arm by header: in no figure, counted apart
FORCED_TRACES, FORCED_FEEDBACK = forced(FORCED)


def _loaded(s: Any) -> Iterator[Any]:
    s.write_records([*TRACES, *FORCED_TRACES])
    s.write_records([*FEEDBACK, *FORCED_FEEDBACK])
    yield s
    s.close()


@pytest.fixture(params=["duckdb", "http", "elasticsearch-contract"], scope="module")
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "duckdb":
        yield from _loaded(DuckDBTraceStore(tmp_path_factory.mktemp("db") / "t.duckdb"))
        return
    if request.param == "http":
        db = DuckDBTraceStore(tmp_path_factory.mktemp("db") / "t.duckdb")
        loaded = _loaded(db)
        next(loaded)
        with served(db, Path(tmp_path_factory.mktemp("spool"))) as url:
            yield HttpTraceStore(url)
        return
    with ContractServer() as server:
        yield from _loaded(ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true"))
    assert server.violations == []


def _arm(arm: str) -> list[Any]:
    return [t for t in TRACES if t.experiment_arm == arm]


def test_the_known_effect_is_found_and_the_null_one_is_not(store: Any) -> None:
    report = store.compare(CompareQuery(a="a", b="b", start=T0, end=END))
    assert (report.n_a, report.n_b) == (N, N) and report.enough_data and not report.srm_flag
    assert list(report.metrics) == list(METRICS)
    cost, errors = report.metrics["cost_per_request"], report.metrics["error_rate"]
    # b is 20% cheaper: the whole interval is below zero, and the delta is near -0.4
    assert cost.ci is not None and cost.ci[1] < 0 and cost.delta == pytest.approx(-0.4, abs=0.05)
    assert cost.significant_after_correction
    # the same error rate: the interval straddles zero and nothing is claimed
    assert errors.a == errors.b == pytest.approx(30 / N) and errors.delta == pytest.approx(0.0)
    assert errors.ci is not None and errors.ci[0] < 0 < errors.ci[1] and not errors.significant_after_correction
    assert "cost_per_request" in report.verdict


def test_values_match_the_traces(store: Any) -> None:
    report = store.compare(CompareQuery(a="a", b="b", start=T0, end=END))
    for side in ("a", "b"):
        traces = _arm(side)
        m = report.metrics
        assert getattr(m["cost_per_request"], side) == pytest.approx(statistics.fmean(t.outcome.cost for t in traces))
        lat = sorted(t.outcome.total_ms for t in traces)
        # binned (0.52%) and, on Elasticsearch, rebuilt from its percentile grid
        assert getattr(m["latency_p50_ms"], side) == pytest.approx(statistics.median(lat), rel=0.02)
        assert getattr(m["latency_p95_ms"], side) == pytest.approx(statistics.quantiles(lat, n=20)[-1], rel=0.03)
        ids = {t.request_id for t in traces}
        fb = [f for f in FEEDBACK if f.request_id in ids]
        assert getattr(m["misroute_rate"], side) == pytest.approx(sum(not f.correct for f in fb) / len(fb))
        assert getattr(m["quality_score"], side) == pytest.approx(
            sum(f.expected_model == "deepseek-v4-32k" for f in fb) / len(fb))
    for name, metric in report.metrics.items():
        assert metric.ci is not None and metric.ci[0] <= metric.delta <= metric.ci[1], name


def test_versions_and_policies_compare_like_arms(store: Any) -> None:
    by_arm = store.compare(CompareQuery(a="a", b="b", start=T0, end=END))
    for by, names in (("version", VERSION), ("policy", POLICY)):
        other = store.compare(CompareQuery(a=names["a"], b=names["b"], by=by, start=T0, end=END))
        assert (other.n_a, other.n_b) == (N, N)
        assert other.metrics["cost_per_request"] == by_arm.metrics["cost_per_request"]
        assert other.metrics["error_rate"] == by_arm.metrics["error_rate"]


def test_forced_requests_are_counted_apart(store: Any) -> None:
    for by, names in (("arm", {"a": "a", "b": "b"}), ("version", VERSION), ("policy", POLICY)):
        report = store.compare(CompareQuery(a=names["a"], b=names["b"], by=by, start=T0, end=END))
        assert (report.n_a, report.n_b, report.forced_a, report.forced_b) == (N, N, FORCED["a"], FORCED["b"]), by
        assert report.verdict.endswith("(19 requests forced onto an arm by header left out)"), report.verdict
        assert report.metrics["misroute_rate"].n_a == sum(f.request_id.startswith("req-a") for f in FEEDBACK)


def test_groups_count_the_window(store: Any) -> None:  # every request, forced or not: the names in the window
    assert store.experiment_groups("arm", T0, END) == {"a": N + FORCED["a"], "b": N + FORCED["b"]}
    assert store.experiment_groups("version", T0, END) == {"v2.3": N + FORCED["a"], "v2.4": N + FORCED["b"]}
    assert store.experiment_groups("policy", END, END + timedelta(hours=1)) == {}


def test_an_unknown_side_and_a_short_window_say_not_enough_data(store: Any) -> None:
    report = store.compare(CompareQuery(a="a", b="nope", start=T0, end=END))
    assert (report.n_a, report.n_b) == (N, 0) and not report.enough_data
    assert report.verdict.startswith("not enough data")
    assert not any(m.significant_after_correction for m in report.metrics.values())
    short = store.compare(CompareQuery(a="a", b="b", start=T0, end=T0 + timedelta(minutes=5)))
    assert 0 < short.n_a < 100 and not short.enough_data


@pytest.mark.parametrize("store", ["http"], indirect=True)
def test_the_http_route_refuses_bad_parameters(store: Any) -> None:
    assert isinstance(store, HttpTraceStore)
    for params in (dict(b="b"), dict(a="a", b="a"), dict(a="a", b="b", by="nope"), dict(a="a", b="b", shares="1")):
        with pytest.raises(SinkError, match="HTTP 400"):
            store._get("/v1/analytics/compare", {**params, "start": T0.isoformat(), "end": END.isoformat()})
    with pytest.raises(SinkError, match="HTTP 400: start is required"):
        store._get("/v1/analytics/compare", {"a": "a", "b": "b", "end": END.isoformat()})
    with pytest.raises(SinkError, match="HTTP 400"):
        store._get("/v1/analytics/groups", {"by": "nope", "start": T0.isoformat(), "end": END.isoformat()})


def test_an_injected_55_45_split_is_flagged(tmp_path: Path) -> None:
    traces, feedback = experiment(1100, 900)
    s = DuckDBTraceStore(tmp_path / "srm.duckdb")
    s.write_records(traces)
    report = s.compare(CompareQuery(a="a", b="b", start=T0, end=END))
    assert report.srm_flag and report.srm_p is not None and report.srm_p < 0.001
    assert report.verdict.startswith("SAMPLE RATIO MISMATCH")
    designed = s.compare(CompareQuery(a="a", b="b", start=T0, end=END, shares=(0.55, 0.45)))
    assert not designed.srm_flag and designed.srm_p == pytest.approx(1.0)
    s.close()
