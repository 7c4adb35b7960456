"""One suite, every backend: DuckDB, DuckDB behind the server's HTTP query API, Elasticsearch through
the contract server, and a real cluster when ROUTELENS_ES_URL is set. Expected answers are computed
from the models in Python."""

from __future__ import annotations

import statistics
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from app.run.gateway_app import StoreHooks
from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from ingest.trace_store import BadCursor
from router_core.decide.builtin import build_router
from router_core.gateway import Gateway
from schemas import DecisionTrace, Feedback, InstanceSnapshot, ProbeKind, ProbeResult
from schemas.config import RouteLensConfig
from schemas.config.storage import StorageSettings
from schemas.policy_record import PolicyRecord
from schemas.queries import AggregateQuery, ConstraintStat, Misroute, TraceFilter
from schemas.records import RouterEvent
from schemas.trace import ScoreWeight, ShadowDecision, Violation
from tests.ingest.conftest import es_client, real_es_url
from tests.ingest.es_contract.server import ContractServer
from tests.serve_thread import in_thread

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
            self.traces.append(_shadowed(_traced(_scored(f.trace(**over), i), i), i))
        self.feedback = [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=5), correct=i % 3 != 0)
                         for i, t in enumerate(self.traces) if i % 2 == 0]
        self.probes = [ProbeResult(probe_id=f"p{i}", ts=T0 + timedelta(minutes=5 * i), instance=f"inst-{i % 2}",
                                   model="m", kind=[ProbeKind.LATENCY, ProbeKind.SEMANTIC][i % 3 == 0],
                                   verdict="ok" if i != 3 else "failed", value=10.0 + i, latency_ms=10.0 + i)
                       for i in range(8)]
        self.events = [RouterEvent(event_id=f"e{i}", ts=T0 + timedelta(minutes=7 * i), kind="breaker" if i % 2 else
                                   "latch", instance="inst-1", message=f"event {i}") for i in range(5)]


def _traced(t: DecisionTrace, i: int) -> DecisionTrace:
    """W3C trace context on every fourth trace (two by two from one client trace), a span id on each attempt."""
    if i % 4:
        return t
    trace_id = f"{max(i, 4) // 8:02x}" + "4bf92f3577b34da6a3ce929d0e0e47"
    attempts = [a.model_copy(update={"span_id": f"{i:08x}{a.seq:08x}"}) for a in t.attempts]
    return t.model_copy(update={"otel_trace_id": trace_id, "otel_span_id": f"{i + 1:016x}",
                                "otel_parent_span_id": "00f067aa0ba902b7", "attempts": attempts})


def _shadowed(t: DecisionTrace, i: int) -> DecisionTrace:
    """A shadow decision on every fifth trace, flipped on every other one of those."""
    if i % 5 != 2:
        return t
    flipped = i % 10 == 2
    return t.model_copy(update={"shadow": ShadowDecision(
        router_version="v2-shadow", policy_hash="sha256:cccccccccccccccc", arm="b",
        selected_model="other-model" if flipped else t.selected_model,
        selected_instance="other-inst" if flipped else t.selected_instance, live_rank=2 if flipped else 1,
        flipped=flipped, latency_ms=0.25)})


WEIGHTS = [ScoreWeight(name="latency", weight=0.6, scorer="latency/latency-scorer"),
           ScoreWeight(name="cost", weight=0.4, scorer="cost/cost-scorer")]


def _scored(t: DecisionTrace, i: int) -> DecisionTrace:
    """Give every third trace score terms: soft violations, a second hard constraint, and terms on removed
    candidates on some (as ``on_empty: fail_open`` records them), so that removals can be decisive."""
    if i % 3:
        return t
    cands = []
    for k, c in enumerate(t.candidates):
        terms = [round((i * 7 + k * 3) % 10 / 10, 1), round((i + k) % 5 / 5, 1)]
        upd: dict[str, Any] = {"score_terms": terms if c.feasible or i % 2 == 0 else []}
        if c.feasible and k % 2:
            upd["violations"] = [Violation(constraint="queue", metric="queue", op="<=", value=9.0, threshold=8.0,
                                           reason="queue 9 > soft 8", severity="soft", score_factor=0.5)]
            upd["weight_factor"] = 0.5
        elif not c.feasible and k % 2:
            upd["violations"] = [*c.violations, *c.violations,  # the same constraint twice counts once
                                 Violation(constraint="health", metric="error_rate", op="<=", value=0.3,
                                           threshold=0.1, reason="error_rate 0.3 > 0.1")]
        factor = upd.get("weight_factor", 1.0)
        total = factor * sum(w.weight * x for w, x in zip(WEIGHTS, terms, strict=True)) if c.feasible else None
        cands.append(c.model_copy(update={**upd, "total": total}))
    return t.model_copy(update={"candidates": cands, "score_weights": WEIGHTS})


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
        es_url = real_es_url()
        if es_url is None:
            pytest.skip("set ROUTELENS_ES_URL to run the suite against a real Elasticsearch")
        prefix = f"rltest-{uuid.uuid4().hex[:8]}"
        yield from _loaded(ElasticsearchStore(es_client(es_url), prefix=prefix, refresh="true"))
        return
    with ContractServer() as server:
        yield from _loaded(ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true"))
    assert server.violations == []


@contextmanager
def served(store: DuckDBTraceStore, spool: Path) -> Iterator[str]:
    """Serve the query API of ``store`` on 127.0.0.1 from a background thread, wired as ``routelens serve``
    wires it: the gateway (``GET /v1/traces/{id}`` through :class:`StoreHooks`), then :class:`IngestApi`."""
    emitter = TraceEmitter(store, StorageSettings(), spool_dir=spool).start()
    config = RouteLensConfig.model_validate(  # an idle instance: its failed scrape is an unrelated snapshot
        {"fleet": {"instances": [{"id": "idle", "model": "m", "url": "http://127.0.0.1:1"}]}})
    app = Gateway(config, build_router(config), StoreHooks(emitter, store)).build_app()
    IngestApi(emitter, store).add_routes(app)
    try:
        with in_thread(app) as url:
            yield url
    finally:
        emitter.close()


def _loaded(s: Any) -> Iterator[Any]:
    s.write_records(DATA.traces)
    s.write_records([*DATA.feedback, *DATA.probes, *DATA.events, POLICY])
    yield s
    s.close()


POLICY = PolicyRecord(policy_hash="sha256:0123456789abcdef", ts=T0, router_version="routelens-0.1.0",
                      arm="a", document='{"format":1,"config":{},"rules":null,"intents":null}')


def test_a_policy_is_read_back_by_its_hash(store: Any) -> None:
    assert store.policy(POLICY.policy_hash) == POLICY
    assert store.policy("sha256:ffffffffffffffff") is None and store.policy("x' OR '1'='1") is None


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
    ("otel_trace_id", DATA.traces[4].otel_trace_id, lambda t: t.otel_trace_id == DATA.traces[4].otel_trace_id),
    ("start", T0 + timedelta(minutes=10), lambda t: t.ts >= T0 + timedelta(minutes=10)),
    ("end", T0 + timedelta(minutes=10), lambda t: t.ts < T0 + timedelta(minutes=10)),
    ("min_latency_ms", 700.0, lambda t: t.outcome.total_ms >= 700.0),
    ("max_latency_ms", 700.0, lambda t: t.outcome.total_ms < 700.0),
    ("violation", "queue", lambda t: any(v.constraint == "queue" for c in t.candidates for v in c.violations)),
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
    rows = store.search(TraceFilter(), limit=1000).items
    shadows = {i.request_id: i.shadow for i in rows}
    assert shadows == {t.request_id: t.shadow for t in DATA.traces} and any(shadows.values())
    otel = {i.request_id: i.otel_trace_id for i in rows}  # a search row names the request's W3C trace
    assert otel == {t.request_id: t.otel_trace_id for t in DATA.traces} and any(otel.values())
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
        assert lat[0] <= b.latency_p50_ms <= b.latency_p95_ms <= b.latency_p99_ms <= lat[-1]
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
    states = {c.state.model_copy(update={"age_s": None, "stale": False}).model_dump_json()  # the age: the trace's
              for t in DATA.traces for c in t.candidates if c.instance == "inst-0" and c.state is not None}
    assert all(isinstance(s, InstanceSnapshot) for s in snaps) and {s.model_dump_json() for s in snaps} == states
    assert store.quarantined(start, end) == []


def test_latency_range_narrows_buckets_and_traffic(store: Any) -> None:
    flt = TraceFilter(start=T0, end=T0 + timedelta(hours=1), min_latency_ms=300.0, max_latency_ms=900.0)
    inside = [t for t in DATA.traces if 300.0 <= t.outcome.total_ms < 900.0]
    assert 0 < len(inside) < len(DATA.traces)
    assert sum(b.requests for b in store.aggregate(AggregateQuery(filter=flt, bucket="1h"))) == len(inside)
    assert sum(e.requests for e in store.traffic(flt)) == len(inside)


def test_a_violation_narrows_buckets_and_traffic(store: Any) -> None:
    flt = TraceFilter(start=T0, end=T0 + timedelta(hours=1), violation="queue")
    inside = [t for t in DATA.traces if any(v.constraint == "queue" for c in t.candidates for v in c.violations)]
    assert 0 < len(inside) < len(DATA.traces)
    assert sum(b.requests for b in store.aggregate(AggregateQuery(filter=flt, bucket="1h"))) == len(inside)
    assert sum(e.requests for e in store.traffic(flt)) == len(inside)


def expected_constraints(traces: list[DecisionTrace]) -> list[ConstraintStat]:
    counts: dict[tuple[str, str, str], list[int]] = {}
    for t in traces:
        best = next((c.total for c in t.candidates if c.instance == t.selected_instance), None)
        for c in t.candidates:
            would = None
            if c.score_terms:
                would = c.weight_factor * sum(w for *_, w in t.terms_of(c))
            for name in {v.constraint for v in c.violations if v.severity == "hard"}:
                n = counts.setdefault((name, c.instance, c.model), [0, 0, 0, 0])
                n[0] += 1
                n[1] += would is not None and best is not None and would > best
                n[2] += would is None or best is None
            for name in {v.constraint for v in c.violations if v.severity == "soft"}:
                counts.setdefault((name, c.instance, c.model), [0, 0, 0, 0])[3] += 1
    stats = [ConstraintStat(constraint=k[0], instance=k[1], model=k[2], removed=n[0], decisive=n[1],
                            undecided=n[2], soft=n[3]) for k, n in counts.items()]
    return sorted(stats, key=lambda s: (-s.removed, -s.soft, s.constraint, s.instance, s.model))


def test_constraint_stats_count_removals_decisive_and_soft(store: Any) -> None:
    expected = expected_constraints(DATA.traces)
    got = store.constraint_stats(TraceFilter())
    assert got == expected
    assert {s.constraint for s in got} == {"kv-cache", "health", "queue"}
    assert sum(s.decisive for s in got) > 0 and sum(s.undecided for s in got) > 0 and sum(s.soft for s in got) > 0
    flt = TraceFilter(start=T0 + timedelta(minutes=20), experiment_arm="a", min_latency_ms=200.0)
    chosen = [t for t in DATA.traces if t.ts >= flt.start and t.experiment_arm == "a"  # type: ignore[operator]
              and t.outcome.total_ms >= 200.0]
    assert store.constraint_stats(flt) == expected_constraints(chosen)
    assert store.constraint_stats(TraceFilter(rule=EVIL)) == []


def expected_misroutes(flt: TraceFilter) -> list[Misroute]:
    by_id = {t.request_id: t for t in DATA.traces}
    picked = [f for f in DATA.feedback if not f.correct and store_match(by_id[f.request_id], flt)]
    return [Misroute(request_id=f.request_id, ts=f.ts, trace_ts=by_id[f.request_id].ts, source=f.source,
                     selected_model=by_id[f.request_id].selected_model, rule=by_id[f.request_id].rule,
                     selected_instance=by_id[f.request_id].selected_instance)
            for f in sorted(picked, key=lambda f: f.ts, reverse=True)]


def store_match(t: DecisionTrace, flt: TraceFilter) -> bool:
    return ((flt.rule is None or t.rule == flt.rule) and (flt.start is None or t.ts >= flt.start)
            and (flt.max_latency_ms is None or t.outcome.total_ms < flt.max_latency_ms))


def test_misroutes_newest_first_with_their_trace(store: Any) -> None:
    got = store.misroutes(TraceFilter())
    assert got and got == expected_misroutes(TraceFilter())
    assert store.misroutes(TraceFilter(), limit=2) == got[:2]
    flt = TraceFilter(start=T0 + timedelta(minutes=15), max_latency_ms=1000.0)
    assert store.misroutes(flt) == expected_misroutes(flt) and len(store.misroutes(flt)) < len(got)
    assert store.misroutes(TraceFilter(rule=EVIL)) == []


def test_a_window_is_one_bucket_with_its_own_quantiles(store: Any) -> None:
    start, end = T0 + timedelta(minutes=7), T0 + timedelta(minutes=52)  # not aligned to any bucket
    got = store.window_stats(TraceFilter(start=start, end=end))
    inside = [t for t in DATA.traces if start <= t.ts < end]
    correct = {f.request_id: f.correct for f in DATA.feedback}
    fb = [correct[t.request_id] for t in inside if t.request_id in correct]
    lat = sorted(t.outcome.total_ms for t in inside)
    assert got.start == start and got.requests == len(inside)
    assert got.errors == sum(t.outcome.status == "error" for t in inside)
    assert got.fallbacks == sum(t.fallback_triggered for t in inside)
    assert got.cost == pytest.approx(sum(t.outcome.cost or 0 for t in inside))
    assert (got.feedback, got.misroutes) == (len(fb), fb.count(False))
    assert got.latency_p50_ms == pytest.approx(statistics.median(lat), rel=0.15)
    assert lat[0] <= got.latency_p50_ms <= got.latency_p95_ms <= got.latency_p99_ms <= lat[-1]
    assert store.window_stats(TraceFilter(start=T0 - timedelta(days=2), end=T0 - timedelta(days=1))) is None
