"""``experiment_series``: each side over time without the requests forced onto an arm by header, as ``compare``.

The forced requests (:func:`tests.ingest.experiment_data.forced`) are errors at ten times the price
with a second's latency and a misroute verdict each: counted in, they move every figure of their
minutes. ``aggregate`` of an arm (the per-minute rollup) counts them; the series must not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ingest import DuckDBTraceStore, ElasticsearchStore
from schemas.queries import AggregateQuery, TraceFilter
from schemas.trace import DecisionTrace
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.server import ContractServer
from tests.ingest.experiments.experiment_data import END, T0, VERSION, experiment, forced
from tests.ingest.experiments.test_compare_older_file import drop_arm_forced

N = 240
TRACES, FEEDBACK = experiment(N, N)
FORCED = {"a": 7, "b": 12}
FORCED_TRACES, FORCED_FEEDBACK = forced(FORCED)
WINDOW = AggregateQuery(filter=TraceFilter(start=T0, end=END), bucket="5m")


@pytest.fixture(params=["duckdb", "elasticsearch-contract"], scope="module")
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if request.param == "duckdb":
        s: Any = DuckDBTraceStore(tmp_path_factory.mktemp("db") / "t.duckdb")
        yield from _loaded(s)
        return
    with ContractServer() as server:
        yield from _loaded(ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true"))
    assert server.violations == []


def _loaded(s: Any) -> Iterator[Any]:
    s.write_records([*TRACES, *FORCED_TRACES])
    s.write_records([*FEEDBACK, *FORCED_FEEDBACK])
    yield s
    s.close()


def _bucket(ts: datetime) -> datetime:
    return ts - (ts - T0) % timedelta(minutes=5)  # T0 is on the hour


def _expected(arm: str) -> dict[datetime, dict[str, Any]]:
    """The figures of each 5-minute bucket of ``arm``, from the unforced traces alone."""
    mine = [t for t in TRACES if t.experiment_arm == arm]
    by_id = {t.request_id: t for t in mine}
    out: dict[datetime, dict[str, Any]] = {}
    for start in sorted({_bucket(t.ts) for t in mine}):
        inside: list[DecisionTrace] = [t for t in mine if _bucket(t.ts) == start]
        verdicts = [f for f in FEEDBACK if f.request_id in by_id and _bucket(by_id[f.request_id].ts) == start]
        out[start] = {"requests": len(inside), "errors": sum(t.outcome.status == "error" for t in inside),
                      "cost": sum(t.outcome.cost or 0.0 for t in inside), "feedback": len(verdicts),
                      "misroutes": sum(not f.correct for f in verdicts),
                      "p95": float(np.quantile([t.outcome.total_ms for t in inside], 0.95))}
    return out


def test_the_series_leave_forced_requests_and_their_feedback_out(store: Any) -> None:
    series = store.experiment_series("arm", "a", "b", WINDOW)
    assert set(series) == {"a", "b"}
    for arm in ("a", "b"):
        got = {b.start: b for b in series[arm]}
        want = _expected(arm)
        assert list(got) == list(want)  # oldest first, only buckets with requests
        for start, w in want.items():
            b = got[start]
            assert (b.requests, b.errors, b.feedback, b.misroutes) == (
                w["requests"], w["errors"], w["feedback"], w["misroutes"]), (arm, start)
            assert b.cost == pytest.approx(w["cost"])
            assert b.latency_p95_ms == pytest.approx(w["p95"], rel=0.02)  # a forced request's 1,000 ms would top it
        assert sum(b.requests for b in series[arm]) == N
        # The arm's aggregate (the rollup, on DuckDB) counts the forced requests: the series differ from it.
        rolled = store.aggregate(WINDOW.model_copy(update={"filter": TraceFilter(start=T0, end=END,
                                                                                 experiment_arm=arm)}))
        assert sum(b.requests for b in rolled) == N + FORCED[arm]


def test_by_version_and_narrowed_by_the_filter(store: Any) -> None:
    by_version = store.experiment_series("version", VERSION["a"], VERSION["b"], WINDOW)
    assert {v: sum(b.requests for b in s) for v, s in by_version.items()} == {VERSION["a"]: N, VERSION["b"]: N}
    ok = WINDOW.model_copy(update={"filter": TraceFilter(start=T0, end=END, outcome="ok")})
    narrowed = store.experiment_series("arm", "a", "b", ok)
    errors = Counter(t.experiment_arm for t in TRACES if t.outcome.status == "error")
    assert {arm: sum(b.requests for b in s) for arm, s in narrowed.items()} == {
        "a": N - errors["a"], "b": N - errors["b"]}
    assert all(b.errors == 0 for s in narrowed.values() for b in s)
    assert store.experiment_series("arm", "a", "nope", WINDOW)["nope"] == []


def test_a_file_from_before_arm_forced_reads_its_series_read_only(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    store = DuckDBTraceStore(path)
    store.write_records(TRACES)
    store.write_records(FEEDBACK)
    store.close()
    drop_arm_forced(path)
    old = DuckDBTraceStore(path, read_only=True)
    series = old.experiment_series("arm", "a", "b", WINDOW)
    old.close()
    assert {arm: sum(b.requests for b in s) for arm, s in series.items()} == {"a": N, "b": N}
    assert sum(b.feedback for b in series["a"]) == _feedback_on("a") > 0  # rid_hash read as hash(request_id)


def _feedback_on(arm: str) -> int:
    ids = {t.request_id for t in TRACES if t.experiment_arm == arm}
    return sum(f.request_id in ids for f in FEEDBACK)
