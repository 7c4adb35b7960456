"""The query API (:class:`ingest.trace_store.TraceStore`) over a DuckDB connection.

Every value reaches DuckDB as a parameter; the SQL text is assembled only from the named queries
in ``sql/queries.sql`` and the fixed predicates below. Each call takes its own cursor, so reads
run from any thread beside the writer (DuckDB's MVCC). Rows come back through the DB-API
(``execute``/``fetchall``): for the small results read here it costs a third of the time of
building an Arrow table and converting that to Python.

A file written before the contract bounded stored times (``schemas.common.UtcTime``) may hold a
``ts`` (or another instant) outside 1970 .. 9999 in UTC: DuckDB hands one beyond Python's years to
Python as text (``0001-12-31 (BC) 10:00:00+00``, ``60000-06-01 00:00:00+00``), and the models
refuse one before 1970. Every instant a read returns at the top level of its rows reads as the
nearest one the contract holds (:func:`shown_time`): :data:`SHOWN_EARLIEST` for one before,
:data:`SHOWN_LATEST` for one after, so the row is listed and opened instead of failing the whole
page. What is selected, counted and ordered is the stored value: windows and counts do not change,
and a page cursor carries the stored instant (as DuckDB writes it when Python cannot hold it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from ingest.codec.stored_rows import assemble_trace, clean, state_ids, summary_of
from ingest.duckdb import rollup
from ingest.duckdb.analytics import DuckDBAnalytics
from ingest.duckdb.experiments import DuckDBExperiments
from ingest.duckdb.file_layout import FileLayout
from ingest.duckdb.latches import DuckDBLatches
from ingest.duckdb.predicates import named_queries
from ingest.duckdb.predicates import where as _where
from ingest.kinds import KINDS, Kind
from ingest.trace_store import BadCursor, WindowReader, clamp_limit, decode_cursor, encode_cursor, sort_traffic
from schemas.common import EARLIEST_TIME, LATEST_TIME
from schemas.queries import BUCKETS, AggregateQuery, BucketStats, TraceFilter, TracePage, TrafficEdge
from schemas.trace import DecisionTrace

__all__ = ["SHOWN_EARLIEST", "SHOWN_LATEST", "DuckDBReader", "named_queries", "shown_time"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
SHOWN_EARLIEST = EARLIEST_TIME
"""How a stored instant before the contract's range reads (the range's first instant)."""
SHOWN_LATEST = LATEST_TIME - timedelta(microseconds=1)
"""How a stored instant after the contract's range reads (its last instant)."""
_TIMESTAMPTZ = "TIMESTAMP WITH TIME ZONE"
# An instant as DuckDB writes one Python cannot hold (or its infinities): a page cursor carries it so.
_STORED_TEXT = re.compile(r"-?infinity|\d{4,}-\d\d-\d\d(?: \(BC\))? \d\d:\d\d:\d\d(?:\.\d{1,6})?[+-]\d\d(?::\d\d){0,2}")


def shown_time(value: datetime | str) -> datetime:
    """A stored instant as the models hold it: one outside the contract's range as the nearest inside.

    Args:
        value: As DuckDB returns it: an aware datetime; the text of one beyond Python's years; or,
            for DuckDB's ``-infinity`` and ``infinity``, a naive ``datetime.min`` or ``datetime.max``.
    """
    if isinstance(value, str):  # beyond years 1 .. 9999: the era or the year says which end
        before = "(BC)" in value or int(value.split("-", 1)[0]) < EARLIEST_TIME.year
    elif value.tzinfo is None:
        before = value.year < EARLIEST_TIME.year
    elif EARLIEST_TIME <= value < LATEST_TIME:
        return value
    else:
        before = value < EARLIEST_TIME
    return SHOWN_EARLIEST if before else SHOWN_LATEST


def _inside(value: Any) -> bool:
    return value is None or (isinstance(value, datetime) and value.tzinfo is not None
                             and EARLIEST_TIME <= value < LATEST_TIME)


def _cursor_time(value: datetime | str) -> str:
    """A stored ``ts`` as a page cursor carries it (DuckDB reads it back: :data:`_STORED_TEXT`)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is None:
        return "-infinity" if value.year < EARLIEST_TIME.year else "infinity"
    return value.isoformat()


def _fetch(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any], *,
           stored: bool = False) -> list[dict[str, Any]]:
    """Run ``sql`` on ``cur`` and return its rows as dicts.

    Instants outside the contract's range read as :func:`shown_time` has them, unless ``stored``.
    """
    try:
        result = cur.execute(sql, params)
    except duckdb.CatalogException:
        return []  # a read-only file written before this table existed
    described = result.description or []
    names = [d[0] for d in described]
    times = [] if stored else [i for i, d in enumerate(described) if str(d[1]) == _TIMESTAMPTZ]
    rows = result.fetchall()
    if times:
        rows = [row if all(_inside(row[i]) for i in times) else _shown(row, times) for row in rows]
    return [dict(zip(names, row, strict=True)) for row in rows]


def _shown(row: Sequence[Any], times: list[int]) -> tuple[Any, ...]:
    out = list(row)
    for i in times:
        if not _inside(out[i]):
            out[i] = shown_time(out[i])
    return tuple(out)


class DuckDBReader(DuckDBAnalytics, DuckDBExperiments, DuckDBLatches, WindowReader):
    """Answers the query API from one DuckDB connection (read-write or read-only).

    Every read goes through the file's :class:`FileLayout`: a file opened read-only keeps the columns
    it was written with, and a column added since reads as NULL (or its default).
    """

    _file_layout: FileLayout | None = None  # learned on the first read

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._reader_con = con

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        cur = self._reader_con.cursor()
        try:
            yield cur
        finally:
            cur.close()

    @staticmethod
    def with_current_columns(con: duckdb.DuckDBPyConnection, sql: str) -> str:
        """``sql`` reading the tables of ``con``'s file with today's columns (a read outside the reader).

        The file's tables are learned anew on each call (10 to 60 ms): for reads made once, not per
        request (the replay's bulk scan, :mod:`app.experiments.bulk`).
        """
        return FileLayout().adapt(con, sql)

    def _adapt(self, cur: duckdb.DuckDBPyConnection, sql: str) -> str:
        """``sql`` reading the file's tables with today's columns (:class:`FileLayout`)."""
        if self._file_layout is None:
            self._file_layout = FileLayout()
        return self._file_layout.adapt(cur, sql)

    def _rows(self, sql: str, params: list[Any], *, stored: bool = False) -> list[dict[str, Any]]:
        with self._cursor() as cur:
            return _fetch(cur, self._adapt(cur, sql), params, stored=stored)

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the trace of ``request_id`` with its candidate states, or None.

        Two index lookups on one cursor: the row, then the snapshots it points at (their ids are
        only known from the row, and a join would scan ``instance_snapshots`` instead).
        """
        with self._cursor() as cur:
            rows = _fetch(cur, self._adapt(cur, named_queries()["get_trace"]), [request_id])
            if not rows:
                return None
            ids = sorted(set(state_ids(rows[0])))
            states: dict[str, dict[str, Any]] = {}
            if ids:
                sql = named_queries()["get_states"].format(marks=", ".join("?" for _ in ids))
                states = {row["snapshot_id"]: row for row in _fetch(cur, self._adapt(cur, sql), ids)}
        return assemble_trace(rows[0], states)

    def count(self, kind: Kind = Kind.TRACE) -> int:
        """Return how many records of ``kind`` are stored."""
        rows = self._rows(f'SELECT count(*) AS n FROM "{KINDS[kind].table}"', [])
        return int(rows[0]["n"]) if rows else 0

    def search(self, flt: TraceFilter, limit: int = 50, cursor: str | None = None) -> TracePage:
        """Return one page of summaries, newest first (keyset pagination on ``(ts, request_id)``).

        The cursor carries the last row's stored ``ts``: a row outside the contract's range is
        listed with the ts :func:`shown_time` gives it, and the next page starts after the stored one.
        """
        limit = clamp_limit(limit)
        where, params = _where(flt)
        mark = "?"
        if cursor is not None:
            ts, rid = decode_cursor(cursor)
            after = str(ts)
            try:
                params += [datetime.fromisoformat(after), str(rid)]
            except ValueError as exc:
                if not _STORED_TEXT.fullmatch(after):
                    raise BadCursor("invalid cursor") from exc
                mark = "CAST(? AS TIMESTAMPTZ)"  # an instant beyond Python's years, as DuckDB wrote it
                params += [after, str(rid)]
            where += f" AND (ts, request_id) < ({mark}, ?)"
        try:
            rows = self._rows(named_queries()["search"].format(where=where), [*params, limit + 1], stored=True)
        except duckdb.ConversionException as exc:
            if mark == "?":
                raise
            raise BadCursor("invalid cursor") from exc  # text shaped like an instant that is none (month 13)
        items = [summary_of({**r, "ts": shown_time(r["ts"])}) for r in rows[:limit]]
        nxt = None
        if len(rows) > limit:
            last = rows[limit - 1]["ts"]
            nxt = encode_cursor([_cursor_time(last), items[-1].request_id])
        return TracePage(items=items, next_cursor=nxt)

    def aggregate(self, query: AggregateQuery) -> list[BucketStats]:
        """Return the time buckets of ``query`` that hold at least one request.

        Buckets are aligned on the epoch (UTC); ``base`` is the start of the one holding
        ``filter.start`` and bucket ``k`` starts at ``base + k * width``.
        """
        if query.filter.start is None:
            raise ValueError("aggregates need filter.start")  # AggregateQuery checks it already
        width = BUCKETS[query.bucket] * 1_000_000
        base = (query.filter.start - _EPOCH) // _US // width * width
        return [_bucket(r, base, width) for r in self._bucket_rows(query.filter, base, width)]

    def window_stats(self, flt: TraceFilter) -> BucketStats | None:
        """Return the window ``[flt.start, flt.end)`` as one bucket starting at ``flt.start``; None without a request.

        Its latency quantiles are the window's own (exact over traces; over sealed minutes of the
        rollup, read from its bins, within about 1%), not a mean of per-bucket quantiles.
        """
        if flt.start is None or flt.end is None:
            raise ValueError("window_stats needs filter.start and filter.end")
        base = (flt.start - _EPOCH) // _US
        width = max((flt.end - _EPOCH) // _US - base, 1)
        rows = self._bucket_rows(flt, base, width)
        return _bucket(rows[0], base, width) if rows else None

    def _bucket_rows(self, flt: TraceFilter, base: int, width: int) -> list[dict[str, Any]]:
        """Rows ``k, requests, errors, fallbacks, q, cost, feedback, misroutes`` of ``flt`` per bucket ``k``."""
        minutes, rest = self._rollup_split(flt)
        if minutes is not None:
            return rollup.Buckets().read(self._rows, flt, minutes, rest, base, width).rows()
        where, params = _where(flt)
        sql = named_queries()["aggregate"].format(where=where)
        return self._rows(sql, [base, width, *params, base, width, *params])

    def traffic(self, flt: TraceFilter) -> list[TrafficEdge]:
        """Return request counts per (rule, model, instance)."""
        minutes, rest = self._rollup_split(flt)
        rows = [] if minutes is None else rollup.traffic_rows(self._rows, flt, minutes)
        for part in rest:
            where, params = _where(part)
            rows += self._rows(named_queries()["traffic"].format(where=where), params)
        edges: dict[tuple[Any, ...], int] = {}
        for r in rows:
            key = (r["rule"], r["model"], r["instance"])
            edges[key] = edges.get(key, 0) + int(r["requests"])
        return sort_traffic([TrafficEdge(rule=k[0], model=k[1], instance=k[2], requests=n) for k, n in edges.items()])

    def _rollup_split(self, flt: TraceFilter) -> tuple[tuple[datetime, datetime] | None, list[TraceFilter]]:
        """The sealed whole minutes of ``flt`` the rollup answers, and the filters left for the traces."""
        if not rollup.answerable(flt):
            return None, [flt]
        return rollup.split(flt, rollup.through(self._rows))

    def _window(self, kind: Kind, start: datetime, end: datetime, eq: dict[str, str | None],
                limit: int) -> list[Any]:
        """Return records of ``kind`` in ``[start, end)`` matching ``eq``, oldest first (see :class:`WindowReader`)."""
        info = KINDS[kind]
        clauses = [f"{info.time_field} >= ?", f"{info.time_field} < ?"]
        params: list[Any] = [start, end]
        for column, value in eq.items():
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        sql = (f'SELECT * FROM "{info.table}" WHERE {" AND ".join(clauses)} '
               f"ORDER BY {info.time_field}, {info.id_field} LIMIT ?")
        rows = self._rows(sql, [*params, limit])
        return [info.model.model_validate(clean(r, info.model)) for r in rows]


def _bucket(r: dict[str, Any], base: int, width: int) -> BucketStats:
    q = r["q"] or [None, None, None]
    return BucketStats(
        start=_EPOCH + timedelta(microseconds=base + r["k"] * width), requests=r["requests"], errors=r["errors"],
        fallbacks=r["fallbacks"], fallback_rate=r["fallbacks"] / r["requests"], latency_p50_ms=q[0],
        latency_p95_ms=q[1], latency_p99_ms=q[2], cost=float(r["cost"]), feedback=r["feedback"],
        misroutes=r["misroutes"], misroute_rate=r["misroutes"] / r["feedback"] if r["feedback"] else None,
    )
