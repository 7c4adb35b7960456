"""Writes record batches into a DuckDB file: one Arrow insert per kind, one transaction per batch.

A batch prepared in pieces holds each kind's Arrow tables as a list; they are inserted as one
(``concat_tables`` copies nothing).

Inserts are ``INSERT OR IGNORE ... BY NAME`` against each table's unique id index, so a record
delivered twice (a replay after a crash, a file imported twice) is stored once and counted as a
duplicate. A different trace under a ``request_id`` already stored is no duplicate: it is returned
for quarantine (:mod:`ingest.duckdb.conflicts`, compared only when the plain insert found an id
taken). Feedback holds one verdict per request id, as the gateway answers a second one 409: a
verdict on a request that holds another (stored earlier, or earlier in ``ts`` in the same batch) is
returned for quarantine with :func:`ingest.record_sink.verdict_reason`, never counted, whichever
way it came (a gateway restarted, a relay, two gateways on one store). Retention by age runs from
the same thread, at most once an hour.

Failures: DuckDB refusing the transaction (locked, disk full, ...) is :class:`SinkUnavailable`, and
the pipeline retries the batch; any other exception is a fault of the records (or of this code),
which the pipeline retries a few times and then writes in parts to quarantine the record at fault
(:mod:`ingest.pipeline.batcher`). Sealing rollup minutes after the commit never fails a write: the
records are stored, and the minutes are sealed later (a minute on).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from ingest.codec.to_arrow import parse_payloads
from ingest.codec.unchecked import check_traces
from ingest.duckdb import rollup
from ingest.duckdb.conflicts import split_conflicts
from ingest.duckdb.derived import select_list
from ingest.duckdb.schema import sql_file, transaction
from ingest.errors import SinkUnavailable
from ingest.kinds import KINDS, Kind
from ingest.record_sink import PreparedBatch, RecordBatch, Rejected, WriteResult, verdict_reason

__all__ = ["DuckDBSink", "split_verdicts"]

log = logging.getLogger(__name__)
# Table names come from the fixed KINDS registry, never from input.
# Traces and feedback gain their derived columns (ingest.duckdb.derived) in the same statement.
_SELECT = {k: select_list(info.table) for k, info in KINDS.items()}
_INSERT = {k: f'INSERT INTO "{info.table}" BY NAME SELECT {_SELECT[k]} FROM batch' for k, info in KINDS.items()}
_INSERT_OR_IGNORE = {k: f'INSERT OR IGNORE INTO "{i.table}" BY NAME SELECT {_SELECT[k]} FROM batch'
                     for k, i in KINDS.items()}
_MINUTE = timedelta(minutes=1)
# Policies and snapshots before the traces that point at them; quarantine last.
_ORDER = [Kind.POLICY, Kind.SNAPSHOT, Kind.TRACE, Kind.FEEDBACK, Kind.PROBE, Kind.EVENT, Kind.QUARANTINE]


class DuckDBSink:
    """The writing side of :class:`ingest.duckdb.store.DuckDBTraceStore`.

    Args:
        con: A read-write connection whose schema is ensured.
        retention_days: Delete records older than this (None: keep everything).
        clock: UTC wall clock for retention.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        retention_days: int | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._con = con
        self.retention_days = retention_days
        self._clock = clock
        self._next_retention = clock()
        self._sealed: datetime | None = None  # the first minute not rolled up yet
        self._next_seal = clock()
        self._seal(clock())

    @staticmethod
    def prepare(batch: RecordBatch) -> PreparedBatch:
        """Parse each kind's payloads into one Arrow table (records Arrow refuses are set aside)."""
        checked = check_traces(batch)
        prepared = PreparedBatch(batch, rejected=checked.rejected)
        if checked.table is not None:  # read already, by the traces' check
            prepared.tables[Kind.TRACE] = [checked.table]
        for kind in _ORDER:
            payloads = batch.payloads.get(kind)
            if payloads and kind not in prepared.tables:
                table, rejected = parse_payloads(kind, payloads)
                prepared.rejected += rejected
                if table is not None:
                    prepared.tables[kind] = [table]
        return prepared

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Store a prepared batch in one transaction.

        A plain ``INSERT`` first (cheap); if an id is already stored, the transaction is redone
        with ``INSERT OR IGNORE`` (slower, and only needed after a replay or a re-import).

        Raises:
            SinkUnavailable: DuckDB refused the transaction (file locked, disk full, ...).
        """
        try:
            result = self._transaction(prepared, _INSERT)
        except duckdb.ConstraintException:
            result = self._transaction(prepared, _INSERT_OR_IGNORE)
        result.rejected = list(prepared.rejected) + result.rejected
        self._maybe_retain()
        self._maybe_seal()
        return result

    def _maybe_seal(self) -> None:
        now = self._clock()
        if now >= self._next_seal and (self._sealed is None or now - rollup.GRACE >= self._sealed + _MINUTE):
            self._seal(now)

    def _seal(self, now: datetime) -> None:
        """Seal the closed minutes; on failure, say so and try again a minute later (never raises)."""
        try:
            self._sealed = rollup.seal(self._con, now)
        except Exception as exc:  # noqa: BLE001  (the records are stored; a store that opens must not stop here)
            log.warning("rollup of closed minutes failed (will retry in a minute): %s: %s", type(exc).__name__, exc)
            self._next_seal = now + _MINUTE
            if self._sealed is None:  # at open: late traces count against what is sealed already
                try:
                    self._sealed = rollup.through(self._fetch)
                except (duckdb.Error, ValueError):
                    pass

    def _transaction(self, prepared: PreparedBatch, statements: dict[Kind, str]) -> WriteResult:
        result = WriteResult()
        cur = self._con.cursor()  # its registered "batch" view goes with it when it closes
        try:
            with transaction(cur):
                for kind in _ORDER:
                    parts = prepared.tables.get(kind)
                    if not parts:
                        continue
                    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
                    dedupe = statements is _INSERT_OR_IGNORE
                    same = 0  # rows already stored (or repeated in the batch) with the same content
                    if dedupe and kind is Kind.TRACE:  # an id is taken: the same trace again, or another one
                        split = split_conflicts(cur, table, prepared)
                        table, same = split.fresh, split.duplicates
                        result.rejected += split.rejected
                    elif dedupe and kind is Kind.FEEDBACK:  # a request holds a verdict: the same again, or another
                        table, same, later = split_verdicts(cur, table, prepared)
                        result.rejected += later
                    cur.register("batch", table)
                    if kind is Kind.TRACE:  # counted in the rollup before the insert: duplicates known
                        rollup.late_traces(cur, table, self._sealed, dedupe=dedupe)
                    elif kind is Kind.FEEDBACK:
                        rollup.late_feedback(cur, table, self._sealed, dedupe=dedupe)
                    rows = cur.execute(statements[kind]).fetchall()
                    inserted = int(rows[0][0]) if rows else 0
                    result.count(kind, inserted, same + table.num_rows - inserted)
        except duckdb.ConstraintException:
            raise
        except duckdb.Error as exc:
            raise SinkUnavailable(f"DuckDB insert failed: {exc}") from exc
        finally:
            cur.close()
        return result

    def _fetch(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cur = self._con.cursor()
        try:
            result = cur.execute(sql, params)
            names = [d[0] for d in result.description or []]
            return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
        finally:
            cur.close()

    def _maybe_retain(self) -> None:
        if self.retention_days is None or self._clock() < self._next_retention:
            return
        self._next_retention = self._clock() + timedelta(hours=1)
        self.apply_retention()

    def apply_retention(self) -> None:
        """Delete what is older than ``retention_days`` (parameterised statements from a .sql file)."""
        if self.retention_days is None:
            return
        cutoff = self._clock() - timedelta(days=self.retention_days)
        cur = self._con.cursor()
        try:
            for stmt in filter(None, (s.strip() for s in _statements(sql_file("retention.sql")))):
                cur.execute(stmt, [cutoff])
        except duckdb.Error as exc:
            log.warning("retention failed (will retry in an hour): %s", exc)
        finally:
            cur.close()

    def close(self) -> None:
        """Nothing to release: the store owns the connection."""


_ROW = "__routelens_row"


def split_verdicts(cur: duckdb.DuckDBPyConnection, table: pa.Table,
                   prepared: PreparedBatch) -> tuple[pa.Table, int, list[Rejected]]:
    """Split a batch's feedback into verdicts to insert, duplicates and later verdicts (in the caller's transaction).

    A row is compared with the verdict stored on its request, else with the batch's earliest (by
    ``ts``, then order) on it: all its columns equal, it is the same verdict (counted a duplicate);
    otherwise it is a later verdict, returned for quarantine. Runs only on the sink's conflict path.
    """
    numbered = table.append_column(_ROW, pa.array(range(table.num_rows), pa.int64()))
    cols = [f'"{c}"' for c in table.column_names]  # the feedback model's fields (and feedback_id)

    def same(a: str, b: str) -> str:
        return " AND ".join(f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in cols)

    cur.register("incoming", numbered)
    try:
        rows = cur.execute(f"""
            WITH i AS (SELECT *, row_number() OVER (PARTITION BY request_id ORDER BY ts, {_ROW}) AS rank_
                       FROM incoming)
            SELECT i.{_ROW}, i.request_id,
                   CASE WHEN s.request_id IS NOT NULL THEN {same("i", "s")} ELSE {same("i", "f")} END AS same
            FROM i JOIN i AS f ON f.request_id = i.request_id AND f.rank_ = 1
            LEFT JOIN feedback s ON s.request_id = i.request_id
            WHERE s.request_id IS NOT NULL OR i.rank_ > 1
        """).fetchall()
    finally:
        cur.unregister("incoming")
    if not rows:
        return table, 0, []
    refused = {id(r.payload) for r in prepared.rejected if r.kind is Kind.FEEDBACK}
    payloads = [p for p in prepared.batch.payloads.get(Kind.FEEDBACK, []) if id(p) not in refused]
    aligned = len(payloads) == table.num_rows
    later = [Rejected(Kind.FEEDBACK, payloads[row] if aligned else orjson.dumps(table.slice(row, 1).to_pylist()[0],
                                                                                default=str),
                      verdict_reason(str(rid))) for row, rid, is_same in rows if not is_same]
    keep = [True] * table.num_rows
    for row, _, _ in rows:
        keep[row] = False
    return table.filter(pa.array(keep)), len(rows) - len(later), later


def _statements(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return "\n".join(lines).split(";")
