"""One suite, every backend: DuckDB, DuckDB behind the server's HTTP query API, Elasticsearch through
the contract server, and a real cluster when ROUTELENS_ES_URL is set. Expected answers are computed
from the models in Python."""

from __future__ import annotations

import asyncio
import statistics
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from app.run.serve import StoreHooks
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.trace_store import BadCursor
from router_core.builtin import build_router
from router_core.gateway import Gateway
from schemas import DecisionTrace, Feedback, InstanceSnapshot, ProbeKind, ProbeResult
from schemas.config import RouteLensConfig
from schemas.queries import AggregateQuery, TraceFilter
from schemas.records import RouterEvent
from schemas.storage_config import StorageSettings
from tests.ingest.conftest import es_client, real_es_url
from tests.ingest.es_contract.server import ContractServer

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
EVIL = "req_1' OR '1'='1'; DROP TABLE traces; --"
BACKENDS = ["duckdb", "http", "elasticsearch-contract", "elasticsearch-real"]


class Data:
    def __init__(self) -> None:
        f = TraceFactory(seed=5, n_candidates=4, start=T0, step=timedelta(minutes=1), round_every=7)
        self.traces: list[DecisionTrace] = []
        for i in range(60):
            over: dict[str, Any] = {}
            if i % 9 == 0:
                over = {"fallback_triggered": True, "fallback_reason": "no feasible instance", "rule": "legal"}
            if i == 13:
                over["request_id"] = EVIL
            self.traces.append(f.trace(**over))
        self.feedback = [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=5), correct=i % 3 != 0)
                         for i, t in enumerate(self.traces) if i % 2 == 0]
        self.probes = [ProbeResult(probe_id=f"p{i}", ts=T0 + timedelta(minutes=5 * i), instance=f"inst-{i % 2}",
                                   model="m", kind=[ProbeKind.LATENCY, ProbeKind.SEMANTIC][i % 3 == 0],
                                   verdict="ok" if i != 3 else "failed", value=10.0 + i, latency_ms=10.0 + i)
                       for i in range(8)]
        self.events = [RouterEvent(event_id=f"e{i}", ts=T0 + timedelta(minutes=7 * i), kind="breaker" if i % 2 else
                                   "latch", instance="inst-1", message=f"event {i}") for i in range(5)]


DATA = Data()


@pytest.fixture(params=BACKENDS, scope="module")
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    kind = request.param
    if kind == "duckdb":
        s: Any = DuckDBTraceStore(Path(tmp_path_factory.mktemp("db")) / "t.duckdb")
        yield from _loaded(s)
        return
    if kind == "http":
        db = DuckDBTraceStore(Path(tmp_path_factory.mktemp("db")) / "t.duckdb")
        loaded = _loaded(db)
        next(loaded)
        with served(db, Path(tmp_path_factory.mktemp("spool"))) as url:
            yield HttpTraceStore(url)
        return
    if kind == "elasticsearch-real":
        url = real_es_url()
        if url is None:
            pytest.skip("set ROUTELENS_ES_URL to run the suite against a real Elasticsearch")
        yield from _loaded(ElasticsearchStore(es_client(url), prefix=f"rltest-{uuid.uuid4().hex[:8]}", refresh="true"))
        return
    with ContractServer() as server:
        yield from _loaded(ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true"))
    assert server.violations == []


@contextmanager
def served(store: DuckDBTraceStore, spool: Path) -> Iterator[str]:
    """Serve the query API of ``store`` on 127.0.0.1 from a background thread, wired as ``routelens serve``
    wires it: the gateway (``GET /v1/traces/{id}`` through :class:`StoreHooks`), then :class:`IngestApi`."""
    emitter = TraceEmitter(store, StorageSettings(), spool_dir=spool).start()
    loop = asyncio.new_event_loop()
    config = RouteLensConfig.model_validate(  # an idle instance: its failed scrape is an unrelated snapshot
        {"fleet": {"instances": [{"id": "idle", "model": "m", "url": "http://127.0.0.1:1"}]}})
    app = Gateway(config, build_router(config), StoreHooks(emitter, store)).build_app()
    IngestApi(emitter, store).add_routes(app)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()
        emitter.close()


def _loaded(s: Any) -> Iterator[Any]:
    s.write_records(DATA.traces)
    s.write_records([*DATA.feedback, *DATA.probes, *DATA.events])
    yield s
    s.close()


def ids(traces: list[DecisionTrace]) -> list[str]:
    return [t.request_id for t in sorted(traces, key=lambda t: (t.ts, t.request_id), reverse=True)]


def test_get_returns_the_trace_as_it_was_emitted(store: Any) -> None:
    for t in DATA.traces[::7] + [DATA.traces[13]]:
        assert store.get(t.request_id) == t
    assert store.get("req_missing") is None and store.get("req_1' OR '1'='1") is None


FILTERS: list[tuple[str, Any, Any]] = [
    ("router_version", "routelens-0.1.0", lambda t: t.router_version == "routelens-0.1.0"),
    ("experiment_arm", "a", lambda t: t.experiment_arm == "a"),
    ("rule", "legal", lambda t: t.rule == "legal"),
    ("model", "deepseek-v4-32k", lambda t: t.selected_model == "deepseek-v4-32k"),
    ("instance", "inst-2", lambda t: t.selected_instance == "inst-2"),
    ("fallback", True, lambda t: t.fallback_triggered),
    ("outcome", "error", lambda t: t.outcome.status == "error"),
    ("query_hash", DATA.traces[4].query_hash, lambda t: t.query_hash == DATA.traces[4].query_hash),
    ("start", T0 + timedelta(minutes=10), lambda t: t.ts >= T0 + timedelta(minutes=10)),
    ("end", T0 + timedelta(minutes=10), lambda t: t.ts < T0 + timedelta(minutes=10)),
]


@pytest.mark.parametrize("name,value,pred", FILTERS, ids=[f[0] for f in FILTERS])
def test_search_by_each_filter(store: Any, name: str, value: Any, pred: Any) -> None:
    page = store.search(TraceFilter.model_validate({name: value}), limit=1000)
    expected = ids([t for t in DATA.traces if pred(t)])
    assert expected and [i.request_id for i in page.items] == expected and page.next_cursor is None


def test_pages_cover_everything_once_newest_first(store: Any) -> None:
    seen, cursor = [], None
    while True:
        page = store.search(TraceFilter(), limit=7, cursor=cursor)
        seen += [i.request_id for i in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids(DATA.traces)
    summary = store.search(TraceFilter(query_hash=DATA.traces[4].query_hash), limit=1).items[0]
    assert summary.total_ms == DATA.traces[4].outcome.total_ms and summary.detail is True
    with pytest.raises(BadCursor):
        store.search(TraceFilter(), cursor="not-a-cursor")


def test_aggregates_by_time_bucket(store: Any) -> None:
    q = AggregateQuery(filter=TraceFilter(start=T0, end=T0 + timedelta(hours=1)), bucket="15m")
    got = store.aggregate(q)
    correct = {f.request_id: f.correct for f in DATA.feedback}
    assert [b.start for b in got] == [T0 + timedelta(minutes=15 * k) for k in range(4)]
    for b in got:
        inside = [t for t in DATA.traces if b.start <= t.ts < b.start + timedelta(minutes=15)]
        lat = sorted(t.outcome.total_ms for t in inside)
        fb = [correct[t.request_id] for t in inside if t.request_id in correct]
        assert b.requests == len(inside) and b.errors == sum(t.outcome.status == "error" for t in inside)
        assert b.fallbacks == sum(t.fallback_triggered for t in inside)
        assert b.fallback_rate == pytest.approx(b.fallbacks / b.requests)
        assert b.cost == pytest.approx(sum(t.outcome.cost or 0 for t in inside))
        assert (b.feedback, b.misroutes) == (len(fb), fb.count(False))
        assert b.misroute_rate == pytest.approx(fb.count(False) / len(fb))
        assert b.latency_p50_ms == pytest.approx(statistics.median(lat), rel=0.15)
        assert lat[0] <= b.latency_p50_ms <= b.latency_p95_ms <= b.latency_p99_ms <= lat[-1]  # type: ignore[operator]
    arm_a = store.aggregate(AggregateQuery(filter=TraceFilter(start=T0, end=T0 + timedelta(hours=1),
                                                              experiment_arm="a"), bucket="1h"))
    in_a = [t for t in DATA.traces if t.experiment_arm == "a"]
    assert arm_a[0].requests == len(in_a)
    assert arm_a[0].feedback == sum(1 for t in in_a if t.request_id in correct)


def test_traffic_rule_model_instance(store: Any) -> None:
    expected = Counter((t.rule, t.selected_model, t.selected_instance) for t in DATA.traces)
    got = store.traffic(TraceFilter())
    assert {(e.rule, e.model, e.instance): e.requests for e in got} == dict(expected)
    assert [e.requests for e in got] == sorted((e.requests for e in got), reverse=True)


def test_probe_timeline_events_snapshots_and_quarantine(store: Any) -> None:
    start, end = T0, T0 + timedelta(hours=2)
    assert store.probe_timeline(start, end) == DATA.probes
    assert store.probe_timeline(start, end, instance="inst-1") == [p for p in DATA.probes if p.instance == "inst-1"]
    semantic = [p for p in DATA.probes if p.kind == "semantic" and p.instance == "inst-1"]
    assert semantic and store.probe_timeline(start, end, instance="inst-1", kind="semantic") == semantic
    assert store.events(start, end, kind="breaker") == [e for e in DATA.events if e.kind == "breaker"]
    snaps = store.snapshots(start, end, instance="inst-0")
    states = {c.state.model_dump_json() for t in DATA.traces for c in t.candidates
              if c.instance == "inst-0" and c.state is not None}
    assert all(isinstance(s, InstanceSnapshot) for s in snaps) and {s.model_dump_json() for s in snaps} == states
    assert store.quarantined(start, end) == []
