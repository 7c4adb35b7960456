"""Trace ingestion: through the emitter into committed DuckDB rows, against the storage floor.

The same traces (8 candidates each by default, states shared per scrape round as the router does)
are (1) prepared as Arrow tables beforehand and inserted straight into a fresh DuckDB file with the
store's own transaction code (the floor), and (2) emitted one by one through a TraceEmitter with
its durable spool into another fresh file; the second rate counts until every row is committed.

The floor is first run once untimed into a scratch file. The first pass through a fresh process
pays for first-touch page faults (kernel time; on this VM the first floor run measured 45,000
traces/s where the next three measured 64,000-77,000), and the pipeline, measured after the floor,
would not: without the warm-up the ratio flatters the pipeline.

As in the server, each scrape round's instance snapshots are emitted once, when the round is
taken (the gateway's scraper hands them over), before the traces that point at them; only the
traces' ``emit()`` calls are timed, since only they sit on a request's path.

Both runs store through the same ``DuckDBTraceStore``, whose checkpoints (compressing the WAL
into the file) wait for an idle moment unless the WAL passes 1 GB: neither rate includes one for
the default 300,000 traces. ``deferred_checkpoint_s`` is what that later checkpoint took for the
floor's file (the same rows).

``emit_p99_us`` is the 99th percentile of the single trace ``emit()`` calls of (2): back to back, while
the pipeline parses and writes behind them (every background step that needs the GIL then lands
inside some ``emit`` call). ``emit_p99_us_paced`` is the same percentile for calls made the way a
gateway makes them, ``--rate`` per second with the thread idle in between, while the sink writes
a backlog of ``--backlog`` traces emitted just before (on a small VM each call after an idle
gap also pays for cold caches: even the encoding alone is slower at the tail).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.synthetic import TraceFactory
from ingest import DuckDBTraceStore, TraceEmitter
from ingest.codec.encoder import Encoder
from ingest.kinds import Kind
from ingest.record_sink import batch_of
from schemas.config.storage import StorageSettings
from schemas.trace import DecisionTrace


def floor_rate(traces: list[DecisionTrace], folder: Path, batch: int) -> tuple[float, float]:
    """Return the floor's traces per second and the seconds its deferred checkpoint took."""
    store = DuckDBTraceStore(folder / "floor.duckdb")
    enc = Encoder()
    items = [item for t in traces for item in enc.encode(t)]
    prepared = [store.prepare(batch_of(items[i:i + batch])) for i in range(0, len(items), batch)]
    t0 = time.perf_counter()
    for p in prepared:
        store.write(p)
    elapsed = time.perf_counter() - t0
    t1 = time.perf_counter()
    store.checkpoint()
    checkpoint_s = time.perf_counter() - t1
    assert store.count() == len(traces)
    store.close()
    return len(traces) / elapsed, checkpoint_s


def emit_round(emitter: TraceEmitter, trace: DecisionTrace, last: object) -> object:
    """Emit the snapshots of a new scrape round (what the scraper does); return the round's marker."""
    first = trace.candidates[0].state if trace.candidates else None
    if first is not last:
        for cand in trace.candidates:
            if cand.state is not None:
                emitter.emit(cand.state)
    return first


def pipeline_rate(traces: list[DecisionTrace], folder: Path, st: StorageSettings) -> tuple[float, list[float]]:
    store = DuckDBTraceStore(folder / "pipeline.duckdb")
    emitter = TraceEmitter(store, st, spool_dir=folder / "spool").start()
    lat = []
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    last: object = None
    for t in traces:
        last = emit_round(emitter, t, last)
        a = clock()
        emitter.emit(t)
        lat.append((clock() - a) / 1000)
    assert emitter.flush(3600)
    elapsed = time.perf_counter() - t0
    written = emitter.stats.stored(Kind.TRACE)[0]
    emitter.close()
    assert written == len(traces), (written, len(traces))
    return len(traces) / elapsed, lat


def paced_latencies(traces: list[DecisionTrace], backlog: int, rate: float, folder: Path,
                    st: StorageSettings) -> tuple[list[float], int]:
    """Emit ``backlog`` traces at once, then the rest ``rate`` per second while those are written."""
    store = DuckDBTraceStore(folder / "paced.duckdb")
    emitter = TraceEmitter(store, st, spool_dir=folder / "paced-spool").start()
    last: object = None
    for t in traces[:backlog]:
        last = emit_round(emitter, t, last)
        emitter.emit(t)
    lat, busy, clock = [], 0, time.perf_counter_ns
    gap = 1 / rate
    for t in traces[backlog:]:
        time.sleep(gap)
        last = emit_round(emitter, t, last)
        busy += emitter.backlog_size() > 0
        a = clock()
        emitter.emit(t)
        lat.append((clock() - a) / 1000)
    assert emitter.flush(3600)
    emitter.close()
    return lat, busy


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench ingest")
    p.add_argument("--traces", type=int, default=300_000)
    p.add_argument("--candidates", type=int, default=8)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--backlog", type=int, default=100_000, help="traces the sink is busy with while paced")
    p.add_argument("--paced", type=int, default=5_000, help="emit() calls timed at --rate")
    p.add_argument("--rate", type=float, default=5_000.0, help="paced emit() calls per second")
    args = p.parse_args(argv)
    st = StorageSettings()
    print(f"generating {args.traces} traces with {args.candidates} candidates ...", flush=True)
    traces = list(TraceFactory(args.seed, n_candidates=args.candidates, round_every=100).traces(args.traces))
    with tempfile.TemporaryDirectory(prefix="routelens-bench-") as tmp:
        floor_rate(traces, Path(tmp) / "warm-up", st.batch_size)  # untimed: see the module docstring
        shutil.rmtree(Path(tmp) / "warm-up")
        floor, checkpoint_s = floor_rate(traces, Path(tmp), st.batch_size)
        print(f"floor (prepared Arrow tables straight into DuckDB): {floor:,.0f} traces/s", flush=True)
        rate, lat = pipeline_rate(traces, Path(tmp), st)
        q = statistics.quantiles(lat, n=100)
        print(f"through the emitter into committed rows: {rate:,.0f} traces/s "
              f"(back-to-back emit p50 {q[49]:.1f} us, p99 {q[98]:.1f} us)", flush=True)
        extra = list(TraceFactory(args.seed + 1, n_candidates=args.candidates, round_every=100)
                     .traces(min(args.backlog, args.traces) + args.paced))
        paced, busy = paced_latencies(extra, min(args.backlog, args.traces), args.rate, Path(tmp), st)
    pq = statistics.quantiles(paced, n=100)
    print(f"emit() at {args.rate:,.0f}/s while the sink writes a backlog ({busy} of {len(paced)} calls with a "
          f"backlog): p50 {pq[49]:.1f} us, p99 {pq[98]:.1f} us")
    print(json.dumps({"traces_per_s": round(rate), "floor_traces_per_s": round(floor), "ratio": round(rate / floor, 3),
                      "emit_p99_us": round(q[98], 1), "emit_p50_us": round(q[49], 1),
                      "emit_p99_us_paced": round(pq[98], 1), "emit_p50_us_paced": round(pq[49], 1),
                      "paced_calls_with_backlog": busy, "deferred_checkpoint_s": round(checkpoint_s, 2),
                      "traces": args.traces, "candidates": args.candidates}))
    return 0
