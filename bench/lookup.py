"""Reads at scale: lookup by request_id and a 24-hour dashboard aggregate over N stored traces.

The traces are generated directly in DuckDB from an Arrow template of real traces (8 candidates,
the store's own schema and snapshots): each generated row is a template row with a new
``request_id`` ('req_' + 20 hex digits of md5(i)) and a timestamp spread over ``--span-hours``,
and one in a hundred gets feedback. Then the store answers as the server would: ``get`` (the row
plus its candidate states, validated into a DecisionTrace) for random ids, and
``aggregate`` (hourly buckets: counts, latency quantiles, fallback rate, cost, misroutes) for the
first 24 hours. By default all N traces fall inside those 24 hours (the worst case).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

from bench.synthetic import TraceFactory
from ingest import DuckDBTraceStore
from ingest.codec.encoder import Encoder
from ingest.duckdb.schema import sql_file
from ingest.kinds import Kind
from ingest.record_sink import batch_of
from schemas.queries import AggregateQuery, TraceFilter

T0 = datetime(2026, 11, 1, tzinfo=UTC)
TEMPLATE = 4096


def request_id(i: int) -> str:
    return "req_" + hashlib.md5(str(i).encode()).hexdigest()[:20]


def step_us(n: int, span_hours: float) -> float:
    """Microseconds between two consecutive generated traces (trace ``i`` is at ``T0 + i * step``)."""
    return span_hours * 3600e6 / n


def generate(path: Path, n: int, span_hours: float, chunk: int = 1_000_000) -> None:
    store = DuckDBTraceStore(path)
    enc = Encoder()
    items = [item for t in TraceFactory(7, n_candidates=8, round_every=64).traces(TEMPLATE) for item in enc.encode(t)]
    prepared = store.prepare(batch_of(items))
    snaps = prepared.tables.pop(Kind.SNAPSHOT)
    store.write(store.prepare(batch_of([(k, p) for k, p in items if k is Kind.SNAPSHOT])))
    (template,) = prepared.tables[Kind.TRACE]
    template = template.append_column("k", pa.array(range(template.num_rows), pa.int64()))
    del snaps
    store.close()
    replicate(path, template, n, span_hours, chunk)


def replicate(path: Path, template: pa.Table, n: int, span_hours: float, chunk: int = 1_000_000, *,
              right_unless_every: int = 700, expected_model_every: int | None = None,
              expected_model: str = "qwen-72b") -> None:
    """Insert ``n`` traces into ``path``: template row ``i % TEMPLATE`` (its column ``k``), a new id and time.

    One in a hundred gets feedback, wrong when ``i % right_unless_every == 0``, naming
    ``expected_model`` when ``i % expected_model_every == 0``.
    """
    con = duckdb.connect(str(path))
    con.execute("SET checkpoint_threshold = '1GB'")
    con.execute("DROP INDEX IF EXISTS traces_request_id_key")
    con.register("template", template)
    step = step_us(n, span_hours)
    expected = ("NULL" if expected_model_every is None
                else f"CASE WHEN i % {int(expected_model_every)} = 0 THEN ? END")
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        con.execute(
            "INSERT INTO traces BY NAME SELECT * EXCLUDE (k, i) REPLACE ("
            " 'req_' || substr(md5(CAST(i AS VARCHAR)), 1, 20) AS request_id,"
            " ? + to_microseconds(CAST(i * ? AS BIGINT)) AS ts)"
            " FROM range(?, ?) g(i) JOIN template t ON t.k = g.i % ?",
            [T0, step, lo, hi, TEMPLATE],
        )
        con.execute(
            "INSERT INTO feedback BY NAME SELECT md5('fb' || i)[:24] AS feedback_id,"
            " 'req_' || substr(md5(CAST(i AS VARCHAR)), 1, 20) AS request_id,"
            " ? + to_microseconds(CAST(i * ? AS BIGINT) + 5000000) AS ts,"
            f" i % {int(right_unless_every)} <> 0 AS correct, NULL AS expected_class, {expected} AS expected_model,"
            " 'bench' AS source FROM range(?, ?, 100) g(i)",
            [T0, step, *([expected_model] if expected_model_every is not None else []), lo, hi],
        )
        print(f"  generated {hi:,} / {n:,}", flush=True)
    con.execute(sql_file("indexes.sql"))
    con.execute("CHECKPOINT")
    con.close()


def holds(path: Path, n: int, span_hours: float) -> bool:
    """True when ``path`` already holds the ``n`` traces :func:`generate` spreads over ``span_hours``."""
    if not path.exists():
        return False
    con = duckdb.connect(str(path), read_only=True)
    try:
        count, last = con.execute("SELECT count(*), max(ts) FROM traces").fetchone() or (0, None)
    except duckdb.Error:
        return False
    finally:
        con.close()
    want_last = T0 + timedelta(microseconds=int((n - 1) * step_us(n, span_hours))) if n else None
    return bool(count == n and (last is None or want_last is None or abs((last - want_last).total_seconds()) < 1))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench lookup")
    p.add_argument("--traces", type=int, default=1_000_000)
    p.add_argument("--span-hours", type=float, default=24.0, help="time the traces are spread over")
    p.add_argument("--lookups", type=int, default=2000)
    p.add_argument("--db", help="keep the generated file here (reused when it holds --traces over --span-hours)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    tmp = None
    if args.db:
        path = Path(args.db)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="routelens-lookup-")
        path = Path(tmp.name) / "traces.duckdb"
    try:
        if not holds(path, args.traces, args.span_hours):
            path.unlink(missing_ok=True)
            print(f"generating {args.traces:,} traces in {path} ...", flush=True)
            t = time.perf_counter()
            generate(path, args.traces, args.span_hours)
            print(f"  done in {time.perf_counter() - t:.0f} s, {path.stat().st_size / 1e9:.2f} GB", flush=True)
        store = DuckDBTraceStore(path)
        rng = random.Random(args.seed)
        ids = [request_id(rng.randrange(args.traces)) for _ in range(args.lookups)]
        lat = []
        for rid in ids:
            t = time.perf_counter()
            trace = store.get(rid)
            lat.append((time.perf_counter() - t) * 1e3)
            assert trace is not None and len(trace.candidates) == 8 and trace.candidates[0].state is not None
        query = AggregateQuery(filter=TraceFilter(start=T0, end=T0 + timedelta(hours=24)), bucket="1h")
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            buckets = store.aggregate(query)
            runs.append((time.perf_counter() - t) * 1e3)
        in_day = sum(b.requests for b in buckets)
        store.close()
    finally:
        if tmp is not None:
            tmp.cleanup()
    q = statistics.quantiles(lat, n=100)
    print(f"lookup p50 {q[49]:.2f} ms p99 {q[98]:.2f} ms; 24 h aggregate over {in_day:,} traces: "
          f"{', '.join(f'{r:.0f}' for r in runs)} ms")
    print(json.dumps({"traces": args.traces, "lookup_p99_ms": round(q[98], 2), "agg_24h_ms": round(max(runs), 1),
                      "lookup_p50_ms": round(q[49], 2), "agg_24h_traces": in_day}))
    return 0
