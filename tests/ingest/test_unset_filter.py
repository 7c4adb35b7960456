"""``TraceFilter.unset``: the traces whose rule, selected model or selected instance is empty, on every backend.

Topology draws such traces as "(no rule)", "(no model)", "(not routed)"; with no filter for "this
field is empty" their links opened every decision of the scope. DuckDB (its traces, and once the
minutes are sealed, still its traces: the rollup holds no such dimension), DuckDB behind the HTTP
query API (:class:`HttpTraceStore` sends the filter, the server parses it) and Elasticsearch (a
``must_not`` ``exists``; its feedback reads count as DuckDB's) answer alike, each checked against
what the traces say in Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bench.synthetic import TraceFactory
from ingest.duckdb.store import DuckDBTraceStore
from ingest.elasticsearch.filters import filter_query
from ingest.elasticsearch.store import ElasticsearchStore
from ingest.http_api.client import HttpTraceStore
from ingest.http_api.routes import IngestApi
from ingest.pipeline.emitter import TraceEmitter
from schemas import DecisionTrace, Feedback
from schemas.config.storage import StorageSettings
from schemas.queries import AggregateQuery, TraceFilter
from tests.ingest.conftest import es_client
from tests.ingest.es_contract.engine import Engine
from tests.ingest.es_contract.server import ContractServer
from tests.serve_thread import in_thread

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
END = T0 + timedelta(hours=1)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _blanked(t: DecisionTrace, i: int) -> DecisionTrace:
    """No rule on every fourth trace, nothing selected on every fifth, a model but no instance on every seventh."""
    update: dict[str, Any] = {}
    if i % 4 == 1:
        update["rule"] = None
    if i % 5 == 2:
        update |= {"selected_model": None, "selected_instance": None}
    if i % 7 == 3:
        update["selected_instance"] = None
    return t.model_copy(update=update)


FACTORY = TraceFactory(seed=11, n_candidates=4, round_every=1, start=T0, step=timedelta(seconds=50))
TRACES = [_blanked(FACTORY.trace(), i) for i in range(70)]
# A verdict on every other trace; the first ten of them stored before their trace (no context in Elasticsearch).
VERDICTS = [Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=20), correct=i % 3 != 0)
            for i, t in enumerate(TRACES) if i % 2 == 0]
EARLY, LATE = VERDICTS[:10], VERDICTS[10:]
UNSET = [["rule"], ["model"], ["instance"], ["model", "instance"], ["rule", "instance"], ["rule", "model", "instance"]]
FILTERS = [{"unset": u} for u in UNSET] + [
    {"unset": ["instance"], "experiment_arm": "a"},
    {"unset": ["rule"], "model": TRACES[1].selected_model},  # a value for one field, another one empty
]
COLUMN = {"rule": "rule", "model": "selected_model", "instance": "selected_instance"}


def _ids(fields: dict[str, Any]) -> str:
    return "+".join(f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in fields.items())


def selected(flt: TraceFilter) -> list[DecisionTrace]:
    """The traces ``flt`` selects, by reading them (newest first)."""
    def match(t: DecisionTrace) -> bool:
        return (all(getattr(t, COLUMN[n]) is None for n in flt.unset or ())
                and (flt.experiment_arm is None or t.experiment_arm == flt.experiment_arm)
                and (flt.model is None or t.selected_model == flt.model))
    return sorted((t for t in TRACES if match(t)), key=lambda t: (t.ts, t.request_id), reverse=True)


def figures(store: Any, flt: TraceFilter) -> dict[str, Any]:
    """Every read a filter narrows, as comparable data."""
    window = store.window_stats(flt)
    return {
        "search": [s.request_id for s in store.search(flt, limit=1000).items],
        "traffic": sorted((e.rule or "", e.model or "", e.instance or "", e.requests) for e in store.traffic(flt)),
        "window": None if window is None else (window.requests, window.feedback, window.misroutes, window.fallbacks),
        "buckets": [(b.start, b.requests, b.feedback, b.misroutes)
                    for b in store.aggregate(AggregateQuery(filter=flt, bucket="15m"))],
        "misroutes": sorted(m.request_id for m in store.misroutes(flt)),
        "constraints": sorted((c.constraint, c.instance, c.model, c.removed) for c in store.constraint_stats(flt)),
    }


@contextmanager
def served(store: DuckDBTraceStore, spool: Path) -> Iterator[str]:
    """The query API of ``store`` on 127.0.0.1, from a background thread."""
    emitter = TraceEmitter(store, StorageSettings(), spool_dir=spool).start()
    app = web.Application()
    IngestApi(emitter, store).add_routes(app)
    try:
        with in_thread(app) as url:
            yield url
    finally:
        emitter.close()


def _write(store: Any) -> None:
    for batch in (EARLY, TRACES, LATE):
        assert store.write_records(batch).rejected == []


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("unset")
    duck = DuckDBTraceStore(root / "t.duckdb", clock=Clock(T0))  # nothing sealed: the traces answer
    sealed = DuckDBTraceStore(root / "sealed.duckdb", clock=Clock(T0 + timedelta(days=1)))  # every minute rolled up
    behind = DuckDBTraceStore(root / "http.duckdb", clock=Clock(T0))
    for s in (duck, sealed, behind):
        _write(s)
    with ContractServer() as server, served(behind, root / "spool") as url:
        es = ElasticsearchStore(es_client(server.url), initial_backoff_s=0.01, refresh="true")
        _write(es)
        yield {"duckdb": duck, "duckdb-sealed": sealed, "http": HttpTraceStore(url), "elasticsearch": es}
        es.close()
    assert server.violations == []
    for s in (duck, sealed, behind):
        s.close()


@pytest.mark.parametrize("fields", FILTERS, ids=_ids)
def test_duckdb_selects_exactly_the_traces_with_the_fields_empty(stores: dict[str, Any],
                                                                 fields: dict[str, Any]) -> None:
    flt = TraceFilter(start=T0, end=END, **fields)
    want = selected(flt)
    assert 0 < len(want) < len(TRACES)
    got = figures(stores["duckdb"], flt)
    assert got["search"] == [t.request_id for t in want]
    assert got["window"] is not None and got["window"][0] == len(want) == sum(e[3] for e in got["traffic"])
    on = {t.request_id for t in want}
    assert got["window"][1:3] == (sum(v.request_id in on for v in VERDICTS),
                                  sum(v.request_id in on and not v.correct for v in VERDICTS))
    assert got["misroutes"] == sorted(v.request_id for v in VERDICTS if v.request_id in on and not v.correct)
    blank = {"rule": 0, "model": 1, "instance": 2}
    assert all(edge[blank[n]] == "" for edge in got["traffic"] for n in fields["unset"])


@pytest.mark.parametrize("backend", ["duckdb-sealed", "http", "elasticsearch"])
@pytest.mark.parametrize("fields", FILTERS, ids=_ids)
def test_every_backend_answers_as_duckdb(stores: dict[str, Any], backend: str, fields: dict[str, Any]) -> None:
    flt = TraceFilter(start=T0, end=END, **fields)
    assert figures(stores[backend], flt) == figures(stores["duckdb"], flt)


def test_unset_alone_without_a_window(stores: dict[str, Any]) -> None:
    flt = TraceFilter(unset=["model"])
    want = [t.request_id for t in selected(flt)]
    for name, store in stores.items():
        assert [s.request_id for s in store.search(flt, limit=1000).items] == want, name
        assert sum(e.requests for e in store.traffic(flt)) == len(want), name


def test_the_filter_s_forms_and_refusals() -> None:
    assert TraceFilter(unset="instance, rule").unset == ["rule", "instance"]  # a query string's form, in order
    assert TraceFilter(unset=["model", "model"]).unset == ["model"]
    assert TraceFilter(unset=[]).unset is None and TraceFilter().unset is None
    assert TraceFilter.model_validate_json('{"rule": "code"}').unset is None  # a filter stored before unset
    with pytest.raises(ValueError, match="literal_error|Input should be"):
        TraceFilter(unset=["colour"])
    with pytest.raises(ValueError, match="unset names model, which the filter also gives a value"):
        TraceFilter(model="m", unset=["model"])


def test_on_feedback_an_empty_field_needs_the_trace_s_context() -> None:
    """A verdict stored before its trace has no ``trace.*``: no context is not a context without a model."""
    query = filter_query(TraceFilter(unset=["model"]), "trace.")
    before = {"request_id": "r1", "correct": False}
    on_blank = {**before, "trace": {"ts": T0.isoformat(), "rule": "code", "selected_model": None}}
    on_model = {**before, "trace": {"ts": T0.isoformat(), "rule": "code", "selected_model": "m"}}
    engine = Engine()
    assert [engine._matches("feedback", doc, query) for doc in (before, on_blank, on_model)] == [False, True, False]
