"""Whole stored traces of a window, read in bulk from a DuckDB file: what ``replay --verify --db`` re-decides.

The store's ``get`` reads one trace with two index look-ups and validates every candidate's state
anew: two thirds of a verification's time at 200 candidates. Here one scan reads
the window's rows in the file's order (arrival order), a batch at a time; each batch's snapshots
are fetched once by id (a join on the ids not met yet), and each distinct stored state (a snapshot
id with the decision's own age and staleness) is validated once into one
:class:`~schemas.fleet.InstanceSnapshot` that every trace holding it shares.

A trace is assembled as the store assembles it (``ingest.codec.stored_rows.assemble_trace``,
through its public parts :func:`ingest.clean_row` and :func:`ingest.readable_state`): the same
model, field for field (``tests/app/experiments/test_replay_numbers_verify.py`` compares every
trace with ``get``). A file written before a column the scan reads reads it as NULL or its default
(``DuckDBTraceStore.with_current_columns``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
from pydantic import ValidationError

from app.experiments.rows import SAMPLED_OUT, UNREADABLE
from ingest import DuckDBTraceStore, clean_row, duckdb_where, readable_state
from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceFilter
from schemas.trace import DecisionTrace

__all__ = ["BATCH_ROWS", "StoredTrace", "read_traces"]

BATCH_ROWS = 256  # a batch of 200-candidate traces: about 0.5 s to read and assemble
_current = DuckDBTraceStore.with_current_columns


@dataclass(frozen=True, slots=True)
class StoredTrace:
    """One stored trace of the window: the trace, or why it was not read (``missing``)."""

    request_id: str
    trace: DecisionTrace | None
    missing: str | None = None


class _States:
    """Stored snapshots by id (their rows), and one validated state per (id, age, staleness)."""

    MAX_KEPT = 20_000  # rows or states kept before both are cleared (between two batches; a few kB each)

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self.rows: dict[str, dict[str, Any]] = {}
        self._made: dict[tuple[str, Any, Any], InstanceSnapshot] = {}
        # The file's snapshot columns as today's (learned once: 10 to 60 ms), as the store's get reads them.
        self._sql = _current(con, "SELECT s.* FROM instance_snapshots s JOIN wanted USING (snapshot_id)")

    def load(self, ids: set[str]) -> None:
        """Fetch the rows of the ids not held yet (an id not stored stays missing)."""
        if len(self.rows) > self.MAX_KEPT or len(self._made) > self.MAX_KEPT:  # rows come in arrival order
            self.rows.clear()
            self._made.clear()
        want = list(ids - self.rows.keys())
        if not want:
            return
        wanted = pa.table({"snapshot_id": pa.array(want, pa.string())})  # noqa: F841  (replacement scan)
        result = self._con.execute(self._sql)
        names = [d[0] for d in result.description or []]
        for values in result.fetchall():
            row = dict(zip(names, values, strict=True))
            self.rows[row["snapshot_id"]] = row

    def state(self, sid: str, age: Any, stale: Any) -> InstanceSnapshot | None:
        """The state a candidate recorded: its snapshot with the decision's age (None: not stored).

        A valid age (a number, at least 0) only sets ``age_s`` and ``stale``, as validating the row
        with it would (:func:`ingest.readable_state` leaves every other field as it is): one copy of
        the snapshot validated once. Any other age goes through validation, as ``get`` has it.
        """
        key = (sid, age, stale)
        got = self._made.get(key)
        if got is not None:
            return got
        row = self.rows.get(sid)
        if row is None:
            return None
        if stale is None:  # a row stored before the decision's own age: the snapshot's
            got = _validated(row)
        elif isinstance(stale, bool) and isinstance(age, float | int) and not isinstance(age, bool) and age >= 0:
            base = self._made.get((sid, None, False))
            if base is None:
                base = self._made[(sid, None, False)] = _validated({**row, "age_s": None, "stale": False})
            got = base.model_copy(update={"age_s": float(age), "stale": stale})
        else:
            got = _validated({**row, "age_s": age, "stale": stale})
        self._made[key] = got
        return got


def _validated(row: dict[str, Any]) -> InstanceSnapshot:
    return InstanceSnapshot.model_validate(readable_state(clean_row(row, InstanceSnapshot)))


def _assemble(row: dict[str, Any], states: _States) -> DecisionTrace:
    """``row`` as a :class:`DecisionTrace`, its candidates' states shared with every other trace holding them."""
    cands = []
    for cand in row.get("candidates") or []:
        cand = dict(cand)
        sid = cand.pop("state_id", None)
        age, stale = cand.pop("state_age_s", None), cand.pop("state_stale", None)
        cand["state"] = states.state(sid, age, stale) if sid else None
        cands.append(cand)
    return DecisionTrace.model_validate(clean_row({**row, "candidates": cands}, DecisionTrace))


def read_traces(con: duckdb.DuckDBPyConnection, flt: TraceFilter, batch_rows: int = BATCH_ROWS,
                ) -> Iterator[list[StoredTrace]]:
    """Yield the traces matching ``flt`` in the file's order, a batch at a time.

    A trace stored without its detail (``storage.detail_share``) is not assembled (``missing``:
    :data:`rows.SAMPLED_OUT`), nor is one whose record does not load (:data:`rows.UNREADABLE`).
    """
    sql, params = duckdb_where(flt)
    cur = con.cursor()
    states = _States(con.cursor())
    try:
        result = cur.execute(_current(cur, f"SELECT * FROM traces WHERE {sql}"), params)
        names = [d[0] for d in result.description or []]
        while batch := result.fetchmany(batch_rows):
            rows = [dict(zip(names, values, strict=True)) for values in batch]
            states.load({c["state_id"] for r in rows if r.get("detail") for c in r.get("candidates") or []
                         if c.get("state_id")})
            out = []
            for row in rows:
                rid = row["request_id"]
                if not row.get("detail"):
                    out.append(StoredTrace(rid, None, SAMPLED_OUT))
                    continue
                try:
                    out.append(StoredTrace(rid, _assemble(row, states)))
                except (ValidationError, ValueError, TypeError):
                    out.append(StoredTrace(rid, None, UNREADABLE))
            yield out
    finally:
        cur.close()
