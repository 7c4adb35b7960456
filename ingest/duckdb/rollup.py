"""The per-minute traffic rollup: the overview's buckets and the topology's edges without a scan of the day.

A day of ten million traces takes a second or more to scan for bucket figures and latency
quantiles. The sink keeps ``traffic_minutes`` instead: per closed minute and (router_version,
experiment_arm, rule, model, instance), the requests, errors, fallbacks, cost, feedback, misroutes
and a latency histogram (log bins, :class:`ingest.experiments.stats.LogBins` with ratio 1.021:
each order statistic read from it is within half a bin, about 1%, of the exact one; see :func:`quantile`).

Minutes are *sealed* once they are :data:`GRACE` old (``routelens_meta.rollup_through`` is the
first unsealed minute): sealing rolls up the stored traces of the newly closed minutes, with the
feedback already stored on them. After that, the sink adds delta rows in the same transaction as
the records: a trace stored late (its ``ts`` before ``rollup_through``) and feedback on a sealed
trace. Each trace and each feedback is therefore counted exactly once, whatever the order they
arrive in; a second verdict on a request is refused by the sink before it is counted (one verdict
per request: :mod:`ingest.duckdb.sink`). A store opened read-write seals on open, so an old file is
backfilled once (and again after its later verdicts are moved out: :mod:`ingest.duckdb.schema`).
Minutes are UTC minutes: a window's edges are floored in UTC, whatever zone the filter is given in.

Only traces whose ``ts`` lies in the contract's range (``schemas.common.UtcTime``: from 1970 to the
last day of 9999 in UTC) are rolled up. A file written before the contract bounded it may hold one outside
(DuckDB hands such a value to Python as a string, ``0001-12-31 (BC) ...``, and Arrow's would
overflow a Python datetime): it is left out, and said once, instead of stopping the store.

Reads (:func:`aggregate`, :func:`traffic`) take the whole minutes of the window below
``rollup_through`` from the rollup and the rest (the window's partial edge minutes, the unsealed
tail) from the traces. A filter the rollup cannot answer (query hash, latency range, fallback,
outcome) or a file without the rollup reads the traces as before, with exact quantiles.
Retention deletes rollup minutes before the cutoff's minute.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ingest.duckdb.predicates import named_queries, where
from ingest.experiments.stats import LogBins
from schemas.common import EARLIEST_TIME, LATEST_TIME
from schemas.queries import TraceFilter

__all__ = ["BINS", "GRACE", "Buckets", "answerable", "late_feedback", "late_traces", "quantile", "seal", "split",
           "through", "traffic_rows"]

log = logging.getLogger(__name__)
BINS = LogBins(k=1000)
GRACE = timedelta(minutes=2)
_MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DIMS = ("router_version", "experiment_arm", "rule", "model", "instance")
# TraceFilter field -> predicate on traffic_minutes; a filter setting any other field reads the traces.
_PREDICATES = {"router_version": "router_version = ?", "experiment_arm": "experiment_arm = ?", "rule": "rule = ?",
               "model": "model = ?", "instance": "instance = ?"}
# What the rollup holds of a filter: its window and these dimensions. Any other field (fallback, outcome, a
# query hash, a W3C trace id, latency bounds, a violation, and whatever TraceFilter gains) reads the traces.
_ANSWERABLE = frozenset({"start", "end", *_PREDICATES})
Fetch = Callable[[str, list[Any]], list[dict[str, Any]]]
_US = timedelta(microseconds=1)
_said_outside = False  # the traces outside the contract's range were logged (once a process)


def _bin_sql(column: str) -> str:
    lo, ratio = BINS.lo, BINS.ratio
    return (f"CASE WHEN {column} < {lo!r} THEN 0 ELSE least(CAST(floor(ln(greatest({column}, {lo!r}) / {lo!r}) "
            f"/ ln({ratio!r})) AS BIGINT) + 1, {BINS.k + 1}) END")


def _q(name: str, **parts: str) -> str:
    return named_queries("rollup.sql")[name].format(**parts)


def _floor(ts: datetime) -> datetime:
    # In UTC: the rollup's minutes are UTC minutes, and a zone's offset may hold seconds (Africa/Monrovia's
    # -0:44:30 until 1972): floored there, a window's edge minute would fall between the two reads.
    return ts.astimezone(UTC).replace(second=0, microsecond=0)


def _ceil(ts: datetime) -> datetime:
    low = _floor(ts)
    return low if low == ts else low + _MINUTE


def through(fetch: Fetch) -> datetime | None:
    """The first minute not sealed yet (None: nothing sealed, or a file without the rollup)."""
    rows = fetch("SELECT value FROM routelens_meta WHERE key = 'rollup_through'", [])
    return datetime.fromisoformat(rows[0]["value"]) if rows else None


def seal(con: duckdb.DuckDBPyConnection, now: datetime) -> datetime | None:
    """Roll up every minute closed :data:`GRACE` before ``now`` not sealed yet (one transaction).

    Returns:
        The first unsealed minute now (None while the store holds no trace).
    """
    con.execute(_q("create"))
    cur = con.execute("SELECT value FROM routelens_meta WHERE key = 'rollup_through'").fetchall()
    start = datetime.fromisoformat(cur[0][0]) if cur else None
    if start is None:
        first = _first_ts(con)
        start = _floor(first) if first is not None else None
    end = _floor(now - GRACE)
    if start is None or start >= end:
        return start if cur else None
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute(_q("roll", bin=_bin_sql("outcome.total_ms"), source="traces", fresh="TRUE"), [start, end])
        con.execute("INSERT OR REPLACE INTO routelens_meta VALUES ('rollup_through', ?)", [end.isoformat()])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return end


def _first_ts(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """The earliest stored ``ts`` in the contract's range (None: none); traces outside it are said once."""
    global _said_outside
    first, outside = con.execute(
        "SELECT min(ts) FILTER (WHERE ts >= ? AND ts < ?), count(*) FILTER (WHERE ts < ? OR ts >= ?) FROM traces",
        [EARLIEST_TIME, LATEST_TIME, EARLIEST_TIME, LATEST_TIME]).fetchall()[0]
    if outside and not _said_outside:
        _said_outside = True
        log.warning("%d stored traces have a ts outside %s .. %s (stored before the contract bounded it); "
                    "the traffic rollup leaves them out", outside, EARLIEST_TIME.date(), LATEST_TIME.date())
    return first if isinstance(first, datetime) else None


def _stored(cur: duckdb.DuckDBPyConnection, table: str, id_field: str, ids: list[str]) -> set[str]:
    sql = _q("stored_ids", id=id_field, table=table, marks=", ".join("?" for _ in ids))
    return {r[0] for r in cur.execute(sql, ids).fetchall()}


def late_traces(cur: duckdb.DuckDBPyConnection, batch: pa.Table, until: datetime | None, *, dedupe: bool) -> None:
    """Before ``batch`` (registered as ``batch``) is inserted: roll up its traces older than ``until``.

    ``dedupe``: the batch may hold traces already stored (the sink's INSERT OR IGNORE path); those
    are left out, looked up by id.
    """
    if until is None or batch.num_rows == 0:
        return
    # In microseconds: a value outside Python's years (refused by the contract, but not by Arrow) cannot overflow.
    oldest = pc.min(batch.column("ts").cast(pa.int64())).as_py()
    if oldest is None or oldest >= (until - _EPOCH) // _US:  # live traffic: nothing late (the query costs ~15 ms)
        return
    fresh = "TRUE"
    params: list[Any] = []
    if dedupe:
        ids = [str(x) for x in batch.column("request_id").to_pylist()]
        known = sorted(_stored(cur, "traces", "request_id", ids))
        if known:
            fresh = f"request_id NOT IN ({', '.join('?' for _ in known)})"
            params = known
    cur.execute(_q("roll", bin=_bin_sql("outcome.total_ms"), source="batch", fresh=fresh),
                [EARLIEST_TIME, until, *params])


def late_feedback(cur: duckdb.DuckDBPyConnection, batch: pa.Table, until: datetime | None, *, dedupe: bool) -> None:
    """Before feedback ``batch`` is inserted: count it on its traces that are sealed already."""
    if until is None or batch.num_rows == 0:
        return
    rows = list(zip(batch.column("feedback_id").to_pylist(), batch.column("request_id").to_pylist(),
                    batch.column("correct").to_pylist(), strict=True))
    if dedupe:
        known = _stored(cur, "feedback", "feedback_id", [str(f) for f, _, _ in rows])
        rows = [r for r in rows if r[0] not in known]
    ids = sorted({str(rid) for _, rid, _ in rows})
    if not ids:
        return
    sql = _q("trace_keys", marks=", ".join("?" for _ in ids))
    # A trace outside the contract's range is not rolled up (its minute may be a string: Python cannot hold it).
    keys = {r[0]: r[1:] for r in cur.execute(sql, [*ids, until]).fetchall()
            if isinstance(r[1], datetime) and EARLIEST_TIME <= r[1] < LATEST_TIME}
    delta: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
    for _, rid, correct in rows:
        if (key := keys.get(str(rid))) is not None:
            delta[key][0] += 1
            delta[key][1] += 0 if correct else 1
    if delta:
        cur.executemany("INSERT INTO traffic_minutes VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, ?, ?, NULL, NULL, NULL)",
                        [[*key, n, bad] for key, (n, bad) in delta.items()])


def answerable(flt: TraceFilter) -> bool:
    """True when the rollup holds what ``flt`` selects (a window and rollup dimensions only)."""
    return flt.start is not None and flt.end is not None and \
        all(getattr(flt, f) is None for f in type(flt).model_fields if f not in _ANSWERABLE)


def split(flt: TraceFilter, sealed: datetime | None) -> tuple[tuple[datetime, datetime] | None, list[TraceFilter]]:
    """The whole sealed minutes of ``flt``'s window, and filters for the rest of it (read from the traces)."""
    assert flt.start is not None and flt.end is not None
    lo, hi = _ceil(flt.start), min(_floor(flt.end), sealed or flt.start)
    if sealed is None or lo >= hi:
        return None, [flt]
    rest = [flt.model_copy(update={"end": lo})] if flt.start < lo else []
    if hi < flt.end:
        rest.append(flt.model_copy(update={"start": hi}))
    return (lo, hi), rest


def _where(flt: TraceFilter, minutes: tuple[datetime, datetime]) -> tuple[str, list[Any]]:
    clauses, params = ["minute >= ?", "minute < ?"], list(minutes)
    for name, clause in _PREDICATES.items():
        if (value := getattr(flt, name)) is not None:
            clauses.append(clause)
            params.append(value)
    return " AND ".join(clauses), params


def quantile(counts: dict[int, int], q: float, low: float, high: float) -> float | None:
    """Quantile ``q`` as DuckDB's ``quantile_cont`` defines it, each order statistic read from its bin.

    The order statistics at ranks floor and ceil of ``(n - 1) * q`` are each taken as their bin's
    geometric centre (within half a bin, about 1%, of the value), interpolated like
    ``quantile_cont``, and clamped to the observed [low, high].
    """
    bins = sorted((b, n) for b, n in counts.items() if n > 0)
    total = sum(n for _, n in bins)
    if not total:
        return None
    pos = (total - 1) * q
    lo_rank, frac = int(pos), pos - int(pos)
    values, seen, i = [], 0, 0
    for rank in (lo_rank, min(lo_rank + 1, total - 1)):
        while seen + bins[i][1] <= rank:
            seen += bins[i][1]
            i += 1
        values.append(_centre(bins[i][0]))
    return min(max(values[0] + frac * (values[1] - values[0]), low), high)


def _centre(b: int) -> float:
    if b <= 0:
        return BINS.lo / 2
    if b > BINS.k:
        return BINS.hi
    return float(BINS.lo * BINS.ratio ** (b - 0.5))


class Buckets:
    """Bucket figures merged from rollup and trace rows; quantiles from the merged latency bins."""

    def __init__(self) -> None:
        self.figures: dict[int, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0, 0, math.inf, -math.inf])
        self.latency: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, k: int, row: dict[str, Any]) -> None:
        """Add one row's figures (rollup or traces) to bucket ``k``."""
        acc = self.figures[k]
        for i, name in enumerate(("requests", "errors", "fallbacks", "cost", "feedback", "misroutes")):
            acc[i] += row[name] or 0
        if row["latency_min"] is not None:
            acc[6], acc[7] = min(acc[6], row["latency_min"]), max(acc[7], row["latency_max"])

    def read(self, fetch: Fetch, flt: TraceFilter, minutes: tuple[datetime, datetime] | None,
             rest: list[TraceFilter], base: int, width: int) -> Buckets:
        """Fold in the rollup over ``minutes`` and the traces over each of ``rest``."""
        if minutes is not None:
            clause, params = _where(flt, minutes)
            for r in fetch(_q("totals", where=clause), [base, width, *params]):
                self.add(r["k"], r)
            for r in fetch(_q("latency", where=clause), [base, width, *params]):
                self.latency[r["k"]][int(r["bin"])] += int(r["n"])
        for part in rest:
            clause, params = where(part)
            for r in fetch(_q("raw", bin=_bin_sql("outcome.total_ms"), where=clause), [base, width, *params]):
                self.add(r["k"], r)
                self.latency[r["k"]][int(r["bin"])] += int(r["requests"])
        return self

    def rows(self) -> list[dict[str, Any]]:
        """One dict per bucket holding a request, in ``k`` order, with ``q`` = [p50, p95, p99]."""
        out = []
        for k in sorted(self.figures):
            requests, errors, fallbacks, cost, feedback, misroutes, low, high = self.figures[k]
            if not requests:
                continue
            out.append({"k": k, "requests": int(requests), "errors": int(errors), "fallbacks": int(fallbacks),
                        "cost": float(cost), "feedback": int(feedback), "misroutes": int(misroutes),
                        "q": [quantile(self.latency[k], q, low, high) for q in (0.5, 0.95, 0.99)]})
        return out


def traffic_rows(fetch: Fetch, flt: TraceFilter, minutes: tuple[datetime, datetime]) -> list[dict[str, Any]]:
    """Requests per (rule, model, instance) from the rollup over ``minutes``."""
    clause, params = _where(flt, minutes)
    return fetch(_q("traffic", where=clause), params)
