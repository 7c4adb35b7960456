"""Reading a window of stored traces as :class:`ReplayRow` values, in bulk, from a DuckDB trace file.

The store's ``get`` rebuilds a whole :class:`DecisionTrace` (steps, violations, attempts) at about a
millisecond each; a replay reads a tenth of that. One scan, in time order, selects only the columns
a replay reads (the features' fields, each candidate's instance, model, state id and score terms,
the weights) as Arrow batches; each batch's snapshots are fetched once by id (a join on the
batch's new ids) and kept as one :class:`InstanceSnapshot` per id, the object identity the router's
memo and the replay's decision memo (:mod:`app.experiments.replay_memo`) key on. The filter is the
store's own (:func:`ingest.duckdb_where`), and stored rows are cleaned the way the store cleans
them (:func:`ingest.clean_row`, :func:`ingest.readable_state`). A file written before a column the
scan names (an older one: it is opened read-only, never migrated) reads it as NULL or its default
(``DuckDBTraceStore.with_current_columns``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast, get_origin

import duckdb
import pyarrow as pa

from app.experiments.rows import NO_CANDIDATES, NO_STATE, SAMPLED_OUT, ReplayRow, Settled, StoredTerms, settled_of
from ingest import DUCKDB_OFFLINE, DuckDBTraceStore, clean_row, duckdb_where, readable_state
from schemas.fleet import InstanceSnapshot
from schemas.queries import TraceFilter
from schemas.trace import RequestFeatures

__all__ = ["BATCH_ROWS", "count", "open_file", "read_rows", "split_points"]

BATCH_ROWS = 32_768
_FEATURES = list(RequestFeatures.model_fields)
_NULLABLE = frozenset(k for k, f in RequestFeatures.model_fields.items() if not f.is_required() and f.default is None)
# List-valued features (file_types) come as one joined string: a row's feature values key a cache.
_LISTS = frozenset(k for k, f in RequestFeatures.model_fields.items() if get_origin(f.annotation) is list)
# Lists do not come back as lists (a list's to_pylist costs microseconds per row): candidates,
# weights and features as 64-bit hashes keying a cache (their values read from Arrow once per key;
# beside the features' hash their model, token and character counts, so two different features
# would need those equal and the hash colliding), state ids
# joined into a string, the score terms flattened into one list per row and cut by their lengths.
# No ORDER BY: the file holds traces in arrival order, and order only helps the memo, it never
# changes a decision.
_SELECT = (
    "SELECT request_id, epoch_us(ts) AS ts_us, intent, rule, "
    # the live decision's first choice (a retry may have served another instance)
    "coalesce(list_filter(candidates, lambda c: c.rank = 1)[1].model, selected_model) AS selected_model, "
    "coalesce(list_filter(candidates, lambda c: c.rank = 1)[1].instance, selected_instance) AS selected_instance, "
    "detail, "
    "outcome.cost AS cost, selection_probability, fb.wrong AS misroute, "
    + ", ".join(f"array_to_string(features.{f}, ',') AS f_{f}" if f in _LISTS else f"features.{f} AS f_{f}"
                for f in _FEATURES) + ", "
    "hash(features) AS f_key, features.requested_model AS f_model, features.est_input_tokens AS f_tokens, "
    "features.input_chars AS f_chars, hash(score_weights) AS w_key, score_weights, "
    "hash(list_transform(candidates, lambda c: struct_pack(instance := c.instance, model := c.model))) AS c_key, "
    "list_transform(candidates, lambda c: struct_pack(instance := c.instance, model := c.model)) AS c_list, "
    "array_to_string(list_transform(candidates, lambda c: coalesce(c.state_id, '')), ',') AS c_state, "
    "flatten(list_transform(candidates, lambda c: coalesce(c.score_terms, []))) AS t_flat, "
    "array_to_string(list_transform(candidates, lambda c: len(coalesce(c.score_terms, []))), ',') AS t_lens, "
    "CASE WHEN policy IS NULL AND inputs IS NULL THEN NULL ELSE to_json(struct_pack(step := CASE WHEN policy IS NULL "
    "THEN NULL ELSE struct_pack(rule := policy.rule, target := policy.target, throttled := policy.throttled) END, "
    "inputs := inputs))::VARCHAR END AS settled "
    "FROM traces LEFT JOIN (SELECT request_id, bool_or(NOT correct) AS wrong FROM feedback GROUP BY request_id) fb "
    "USING (request_id) WHERE {where}"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_current = DuckDBTraceStore.with_current_columns  # the SQL over a file lacking some of today's columns
_UNREAD: Any = object()  # a features key not met yet (None is a value: no features stored)
_NEAR = timedelta(minutes=10)  # how far around a batch's traces their snapshots are looked for first
# Read per key or with offsets, not to_pylist per row.
_LAZY = frozenset(("score_weights", "c_list", "t_flat", *(f"f_{f}" for f in _FEATURES)))


def open_file(path: str | Path) -> duckdb.DuckDBPyConnection:
    """Open a trace file read-only (no process may be writing it).

    Raises:
        duckdb.Error: The file is missing, locked by a writer or not a DuckDB file.
    """
    if not Path(path).is_file():
        raise duckdb.IOException(f"trace file {path} does not exist")
    con = duckdb.connect(str(path), read_only=True, config=dict(DUCKDB_OFFLINE))
    con.execute("SET threads = 1")  # one process per core replays; DuckDB's own threads would share them
    return con


def count(con: duckdb.DuckDBPyConnection, flt: TraceFilter) -> int:
    """How many stored traces match ``flt``."""
    sql, params = duckdb_where(flt)
    row = con.execute(_current(con, f"SELECT count(*) FROM traces WHERE {sql}"), params).fetchone()
    return int(row[0]) if row else 0


def split_points(con: duckdb.DuckDBPyConnection, flt: TraceFilter, parts: int) -> list[datetime]:
    """Timestamps cutting the matching traces into ``parts`` ranges of about equal size."""
    if parts <= 1:
        return []
    sql, params = duckdb_where(flt)
    qs = [k / parts for k in range(1, parts)]
    row = con.execute(_current(con, f"SELECT quantile_disc(ts, {qs!r}) FROM traces WHERE {sql}"),
                      params).fetchone()
    return sorted(set(row[0])) if row and row[0] else []


# What a stored snapshot adds to the scrape it copies: its id, when it was first seen, and its age
# at the decision that stored it (``PreparedCache.states_at`` stamps a copy per tenth of a second).
# No filter or scorer reads ``age_s`` or ``stale`` (they work from ``scraped_at`` at the decision
# time), so copies differing only there are one state to the router: one object, one memo entry.
_NOT_STATE = ("snapshot_id", "seen_at", "age_s", "stale")


class _Snapshots:
    """One :class:`InstanceSnapshot` per distinct scrape, found by stored snapshot id, a batch at a time."""

    MAX_KEPT = 200_000  # ids remembered before the memory is cleared (between two batches)

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self.by_id: dict[str, InstanceSnapshot] = {}
        self._by_key: dict[tuple[Any, ...], InstanceSnapshot] = {}
        cols = [r[0] for r in con.execute("DESCRIBE instance_snapshots").fetchall() if r[0] not in _NOT_STATE]
        # hash() is 64 bits: with the instance and the scrape time beside it, two different states
        # would need the same instance, the same scrape and a colliding hash.
        self._key = "s.instance, epoch_us(s.scraped_at), hash(" + ", ".join(f's."{c}"' for c in cols) + ")"

    def _keyed(self, want: list[str], seen: tuple[datetime, datetime] | None) -> pa.Table:
        wanted = pa.table({"snapshot_id": pa.array(want, pa.string())})  # noqa: F841  (replacement scan)
        near = "" if seen is None else "WHERE s.seen_at >= ? AND s.seen_at < ?"
        return self._con.sql(f"SELECT s.snapshot_id, {self._key} FROM instance_snapshots s "
                             f"JOIN wanted USING (snapshot_id) {near}",
                             params=[] if seen is None else list(seen)).to_arrow_table()

    def _states(self, sids: list[str], seen: tuple[datetime, datetime] | None) -> dict[str, InstanceSnapshot]:
        fresh = pa.table({"snapshot_id": pa.array(sids, pa.string())})  # noqa: F841  (replacement scan)
        near = "" if seen is None else "WHERE s.seen_at >= ? AND s.seen_at < ?"
        result = self._con.execute(f"SELECT s.* FROM instance_snapshots s JOIN fresh USING (snapshot_id) {near}",
                                   [] if seen is None else list(seen))
        names = [d[0] for d in result.description or []]
        out: dict[str, InstanceSnapshot] = {}
        for values in result.fetchall():
            rec = dict(zip(names, values, strict=True))
            out[rec["snapshot_id"]] = InstanceSnapshot.model_validate(readable_state(clean_row(rec, InstanceSnapshot)))
        return out

    def load(self, ids: set[str], seen: tuple[datetime, datetime] | None = None) -> None:
        """Make every id of ``ids`` resolvable in :attr:`by_id`.

        A trace's snapshots are stored with it, so they were first seen around its time: looking
        among those first seen within ``seen`` first lets DuckDB skip the rest of the table (its
        zone maps); ids not found there are then looked for in the whole table.
        """
        if len(self.by_id) > self.MAX_KEPT:  # traces come in time order: old snapshots are rarely asked again
            self.by_id.clear()
            self._by_key.clear()
        want = list(ids - self.by_id.keys())
        if not want:
            return
        keyed = self._keyed(want, seen)
        if seen is not None and keyed.num_rows < len(want):
            keyed = self._keyed(want, None)
        sids = keyed.column(0).to_pylist()
        keys = list(zip(*(keyed.column(i).to_pylist() for i in range(1, keyed.num_columns)), strict=True))
        first: dict[tuple[Any, ...], str] = {}
        known = self._by_key
        for sid, key in zip(sids, keys, strict=True):
            if key not in known and key not in first:
                first[key] = sid
        if first:
            by_sid = self._states(list(first.values()), seen)
            if len(by_sid) < len(first):
                by_sid = self._states(list(first.values()), None)
            for fkey, fsid in first.items():
                known[fkey] = by_sid[fsid]
        by_id = self.by_id
        for sid, key in zip(sids, keys, strict=True):
            by_id[sid] = known[key]


def _features(values: list[Any]) -> RequestFeatures | None:
    """A row's features from its stored field values (None: none stored)."""
    if values[0] is None:
        return None
    return RequestFeatures.model_validate(
        {k: (v.split(",") if v else []) if k in _LISTS else v for k, v in zip(_FEATURES, values, strict=True)
         if v is not None or k in _NULLABLE})


def read_rows(con: duckdb.DuckDBPyConnection, flt: TraceFilter, batch_rows: int | None = None,
              ) -> Iterator[list[ReplayRow]]:
    """Yield the traces matching ``flt`` as batches of rows, oldest first."""
    sql, params = duckdb_where(flt)
    cur = con.cursor()
    snaps = _Snapshots(con.cursor())
    feats: dict[tuple[Any, ...], RequestFeatures | None] = {}
    weights: dict[int | None, tuple[tuple[str, float], ...]] = {}
    cands: dict[int | None, tuple[tuple[str, str], ...]] = {}
    insts: dict[int | None, tuple[str, ...]] = {}  # the instances of ``cands``, in order
    cuts: dict[str | None, list[tuple[int, int]]] = {}
    select = _current(cur, _SELECT.format(where=sql))  # an older file: its missing columns NULL
    reader = cur.sql(select, params=params).to_arrow_reader(batch_rows or BATCH_ROWS)
    settled: dict[str | None, Settled | None] = {None: None}
    try:
        for batch in reader:
            names = batch.schema.names
            cols = {n: batch.column(i).to_pylist() for i, n in enumerate(names) if n not in _LAZY}
            flat_col = batch.column(names.index("t_flat"))
            flat = flat_col.values.to_pylist()
            starts = flat_col.offsets.to_pylist()
            sid_lists = {s: s.split(",") if s else [] for s in set(cols["c_state"])}
            us_col = cols["ts_us"]
            seen = None if not us_col else (_EPOCH + timedelta(microseconds=min(us_col)) - _NEAR,
                                            _EPOCH + timedelta(microseconds=max(us_col)) + _NEAR)
            snaps.load({sid for sids in sid_lists.values() for sid in sids if sid}, seen)
            fcols = [batch.column(names.index(f"f_{f}")) for f in _FEATURES]
            by_id = snaps.by_id
            w_col, c_col = batch.column(names.index("score_weights")), batch.column(names.index("c_list"))
            settled_col = cols["settled"]
            out: list[ReplayRow] = []
            append = out.append
            for k, (rid, us, cs, detail, wk, ck, tk, intent, rule, model, inst_, cost, prob, wrong, *fk) in enumerate(
                    zip(cols["request_id"], cols["ts_us"], cols["c_state"], cols["detail"], cols["w_key"],
                        cols["c_key"], cols["t_lens"], cols["intent"], cols["rule"], cols["selected_model"],
                        cols["selected_instance"], cols["cost"], cols["selection_probability"], cols["misroute"],
                        cols["f_key"], cols["f_model"], cols["f_tokens"], cols["f_chars"], strict=True)):
                wt = weights.get(wk)
                if wt is None:
                    wt = weights[wk] = tuple((w["name"], w["weight"]) for w in w_col[k].as_py() or [])
                pairs = cands.get(ck)
                if pairs is None:
                    pairs = cands[ck] = tuple((c["instance"], c["model"]) for c in c_col[k].as_py() or [])
                    insts[ck] = tuple(inst for inst, _ in pairs)
                bounds = cuts.get(tk)
                if bounds is None:
                    lens = [int(x) for x in tk.split(",")] if tk else []
                    ends = [sum(lens[:j + 1]) for j in range(len(lens))]
                    bounds = cuts[tk] = [(e - n, e) for e, n in zip(ends, lens, strict=True)]
                found = list(map(by_id.get, sid_lists[cs]))
                if None in found:  # some state was not stored: only the others
                    states = {inst: snap for inst, snap in zip(insts[ck], found, strict=False) if snap is not None}
                else:
                    states = dict(zip(insts[ck], cast(list[InstanceSnapshot], found), strict=False))
                missing = None
                if not detail:
                    missing = SAMPLED_OUT
                elif not pairs:
                    missing = NO_CANDIDATES
                elif len(states) < len(pairs):
                    missing = NO_STATE
                key = tuple(fk)
                features = feats.get(key, _UNREAD)
                if features is _UNREAD:
                    features = feats[key] = _features([c[k].as_py() for c in fcols])
                sj = settled_col[k]
                st = settled.get(sj, _UNREAD)
                if st is _UNREAD:
                    got = json.loads(sj)
                    st = settled[sj] = settled_of(got["step"], got["inputs"])
                append(ReplayRow(rid, _EPOCH + timedelta(microseconds=us), features, intent, rule, model, inst_, states,
                                 pairs, StoredTerms(flat, starts[k], bounds), wt, cost, missing,
                                 prob, wrong, st))
            yield out
    finally:
        cur.close()
