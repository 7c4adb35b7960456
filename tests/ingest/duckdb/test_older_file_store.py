"""Every read of the DuckDB store over a file from before columns existed, opened read-only (not migrated).

The file is written with today's code, then the columns and struct fields added since the layout of
2026-11-30 are dropped (indexes and views first: DuckDB will not alter a table under them), as an
older RouteLens left it. Each read must answer as over today's file, a missing value read as NULL
or the field's default: what the older writer never recorded.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ingest.duckdb.file_layout import FileLayout
from ingest.duckdb.predicates import named_queries
from ingest.duckdb.store import OFFLINE, DuckDBTraceStore
from schemas.experiments import CompareQuery, CompareReport
from schemas.queries import AggregateQuery, TraceFilter, TraceSummary
from schemas.trace import DecisionTrace
from tests.ingest.duckdb.test_constraint_hits import same_buckets
from tests.ingest.experiments.experiment_data import END as EXP_END
from tests.ingest.experiments.experiment_data import T0 as EXP_T0
from tests.ingest.experiments.experiment_data import experiment
from tests.ingest.test_trace_store import DATA, POLICY, T0, expected_constraints

# What the layout of 2026-11-30 lacked (a file the auditor kept): columns, and fields of structs
# (``a.b``) or of a list's structs (``a.element.b``), per table.
LAYOUT_2026_11_30: dict[str, list[str]] = {
    "traces": ["arm_forced", "policy", "selection_probability", "shadow", "inputs", "otel_trace_id", "otel_span_id",
               "otel_parent_span_id", "otel_trace_flags", "otel_trace_state", "features.file_types",
               "candidates.element.probability", "attempts.element.span_id", "attempts.element.start_ms",
               "constraint_hits", "rid_hash"],
    "feedback": ["rid_hash"],
    "instance_snapshots": ["warmup_source", "probes"],
}
# The trace fields the older file lacks, and the value each reads as.
TRACE_DEFAULTS = {"arm_forced": False, "policy": None, "selection_probability": None, "shadow": None, "inputs": None,
                  "otel_trace_id": None, "otel_span_id": None, "otel_parent_span_id": None, "otel_trace_flags": None,
                  "otel_trace_state": None}


def make_older(path: Path, lacks: Mapping[str, Sequence[str]] = LAYOUT_2026_11_30, *, rollup: bool = False) -> None:
    """Drop from the file at ``path`` what ``lacks`` names (and the rollup, unless ``rollup``)."""
    con = duckdb.connect(str(path))
    try:
        for (index,) in con.execute("SELECT index_name FROM duckdb_indexes()").fetchall():
            con.execute(f'DROP INDEX "{index}"')
        for (view,) in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall():
            con.execute(f'DROP VIEW "{view}"')
        for table, columns in lacks.items():
            for column in columns:
                con.execute(f'ALTER TABLE "{table}" DROP COLUMN {column}')
        if not rollup:
            con.execute("DROP TABLE traffic_minutes")
            con.execute("DELETE FROM routelens_meta WHERE key = 'rollup_through'")
    finally:
        con.close()


def as_older(t: DecisionTrace) -> DecisionTrace:
    """``t`` as read from a file that never recorded what the older layout lacks."""
    return t.model_copy(update={
        **TRACE_DEFAULTS,
        "features": t.features.model_copy(update={"file_types": []}),
        "candidates": [c.model_copy(update={"probability": None}) for c in t.candidates],
        "attempts": [a.model_copy(update={"span_id": None, "start_ms": None}) for a in t.attempts],
    })


def summary_as_older(s: TraceSummary) -> TraceSummary:
    return s.model_copy(update={"shadow": None, "otel_trace_id": None})


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Today's file and a copy of it made older (no rollup: buckets read the traces)."""
    today = tmp_path_factory.mktemp("older") / "today.duckdb"
    store = DuckDBTraceStore(today)
    store.write_records(DATA.traces)
    store.write_records([*DATA.feedback, *DATA.probes, *DATA.events, POLICY])
    store.close()
    older = today.with_name("older.duckdb")
    older.write_bytes(today.read_bytes())
    make_older(older)
    return today, older


@pytest.fixture(scope="module")
def stores(files: tuple[Path, Path]) -> Iterator[tuple[DuckDBTraceStore, DuckDBTraceStore]]:
    today, older = (DuckDBTraceStore(p, read_only=True) for p in files)
    yield today, older
    today.close()
    older.close()


def test_the_file_lacks_the_columns_and_stays_as_it_is(files: tuple[Path, Path],
                                                         stores: tuple[DuckDBTraceStore, DuckDBTraceStore]) -> None:
    _, older = stores
    older.search(TraceFilter())  # a read-only open migrates nothing
    con = duckdb.connect(str(files[1]), read_only=True, config=dict(OFFLINE))
    with pytest.raises(duckdb.BinderException):
        con.execute("SELECT shadow FROM traces")
    with pytest.raises(duckdb.BinderException):
        con.execute("SELECT features.file_types FROM traces")
    con.close()


def test_a_file_of_todays_layout_is_read_as_it_is(files: tuple[Path, Path]) -> None:
    sql = named_queries()["aggregate"].format(where="TRUE")  # traces and feedback
    con = duckdb.connect(str(files[0]), read_only=True, config=dict(OFFLINE))
    try:
        assert FileLayout().adapt(con, sql) == sql
    finally:
        con.close()
    con = duckdb.connect(str(files[1]), read_only=True, config=dict(OFFLINE))
    try:
        adapted = FileLayout().adapt(con, sql)  # after the comments, before the query's own expressions
        assert '\nWITH "traces" AS NOT MATERIALIZED (' in adapted and '"feedback" AS NOT MATERIALIZED (' in adapted
        assert adapted.endswith(sql[sql.index("\nWITH ") + 6:]) and con.execute(adapted, [0, 60_000_000] * 2).fetchall()
    finally:
        con.close()


def test_search_reads_the_missing_columns_as_not_recorded(stores: tuple[DuckDBTraceStore, DuckDBTraceStore]) -> None:
    today, older = stores
    assert any(s.shadow for s in today.search(TraceFilter(), limit=100).items)  # the data has what is dropped
    assert older.search(TraceFilter(), limit=100) == today.search(TraceFilter(), limit=100).model_copy(
        update={"items": [summary_as_older(s) for s in today.search(TraceFilter(), limit=100).items]})
    first = older.search(TraceFilter(), limit=7)  # the Decisions page's pages
    second = older.search(TraceFilter(), limit=7, cursor=first.next_cursor)
    assert [s.request_id for s in first.items + second.items] == \
        [s.request_id for s in today.search(TraceFilter(), limit=14).items]


def test_search_filters_on_what_the_file_lacks(stores: tuple[DuckDBTraceStore, DuckDBTraceStore]) -> None:
    today, older = stores
    violated = TraceFilter(violation="queue")  # on constraint_hits, computed from the candidates
    assert [s.request_id for s in older.search(violated, limit=100).items] == \
        [s.request_id for s in today.search(violated, limit=100).items] != []
    traced = TraceFilter(otel_trace_id=DATA.traces[4].otel_trace_id)  # never recorded: no trace has it
    assert today.search(traced).items and older.search(traced).items == []


def test_get_returns_the_trace_with_what_was_never_recorded_at_its_default(
        stores: tuple[DuckDBTraceStore, DuckDBTraceStore]) -> None:
    today, older = stores
    for t in DATA.traces[::7] + [DATA.traces[13]]:
        got = older.get(t.request_id)
        assert got == as_older(today.get(t.request_id) or t)
        assert got is not None and "file_types" not in got.features.model_fields_set  # said "not recorded"
    assert any(s.state is not None for s in (older.get(DATA.traces[0].request_id) or DATA.traces[0]).candidates)
    assert older.get("req_missing") is None


@pytest.mark.parametrize("rollup", [False, True], ids=["traces", "rollup-and-edges"])
def test_buckets_traffic_constraints_and_misroutes_are_those_of_today(rollup: bool, tmp_path: Path,
                                                                      files: tuple[Path, Path]) -> None:
    path = tmp_path / "older.duckdb"
    path.write_bytes(files[0].read_bytes())
    make_older(path, rollup=rollup)
    # A start inside a minute: with the rollup, the window's edges are read from the traces (rid_hash joined).
    flt = TraceFilter(start=T0 + timedelta(seconds=30), end=T0 + timedelta(hours=2))
    query = AggregateQuery(filter=flt)
    today, older = DuckDBTraceStore(files[0], read_only=True), DuckDBTraceStore(path, read_only=True)
    try:
        buckets = today.aggregate(query)
        assert sum(b.misroutes for b in buckets) > 0
        same_buckets(older.aggregate(query), buckets)
        violated = AggregateQuery(filter=flt.model_copy(update={"violation": "health"}))  # read from the traces
        assert today.aggregate(violated)
        same_buckets(older.aggregate(violated), today.aggregate(violated))
        assert older.traffic(flt) == today.traffic(flt)
        assert older.constraint_stats(TraceFilter()) == expected_constraints(DATA.traces)
        assert older.misroutes(TraceFilter()) == today.misroutes(TraceFilter()) != []
        assert older.snapshots(T0 - timedelta(days=1), T0 + timedelta(days=1)) != []
    finally:
        today.close()
        older.close()


def _flat(value: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{at}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _flat(v, f"{at}[{i}]")
    else:
        yield at, value


def same_report(got: CompareReport, want: CompareReport) -> None:
    """Equal, floats to the last few bits: DuckDB's parallel aggregates do not add in a fixed order (two
    comparisons of one file can differ there)."""
    g, w = dict(_flat(got.model_dump())), dict(_flat(want.model_dump()))
    assert g.keys() == w.keys()
    for key, value in w.items():
        assert g[key] == (pytest.approx(value, rel=1e-9, abs=0) if isinstance(value, float) else value), key


def test_the_experiments_reads_are_those_of_today(tmp_path: Path) -> None:
    """The Experiments page's reads: groups per arm, the comparison, the sample of traces for shadows."""
    path = tmp_path / "exp.duckdb"
    traces, feedback = experiment(90, 90)
    store = DuckDBTraceStore(path)
    store.write_records(traces)
    store.write_records(feedback)
    query = CompareQuery(a="a", b="b", start=EXP_T0, end=EXP_END)
    want: dict[str, Any] = {"groups": store.experiment_groups("arm", EXP_T0, EXP_END), "report": store.compare(query),
                            "version": store.compare(query.model_copy(update={"a": "v2.3", "b": "v2.4",
                                                                                "by": "version"}))}
    store.close()
    make_older(path)
    old = DuckDBTraceStore(path, read_only=True)
    try:
        assert old.experiment_groups("arm", EXP_T0, EXP_END) == want["groups"] == {"a": 90, "b": 90}
        report = old.compare(query)
        same_report(report, want["report"])
        assert report.metrics["misroute_rate"].n_a > 0
        same_report(old.compare(query.model_copy(update={"a": "v2.3", "b": "v2.4", "by": "version"})), want["version"])
        page = old.search(TraceFilter(start=EXP_T0, end=EXP_END), limit=100)
        assert len(page.items) == 100 and all(s.shadow is None for s in page.items)
    finally:
        old.close()
