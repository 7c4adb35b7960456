"""The app's pages, as the store sees them: every page's data queries over 24 h of N stored traces.

The traces are generated as ``bench lookup`` generates them (an Arrow template of 4096 real traces
replicated in DuckDB, one in a hundred with feedback; the derived columns filled once, as the sink
fills them), plus one instance snapshot per instance per
``--scrape-s`` over the day (the fleet grid reads them). The file is cached under
``~/.cache/routelens-bench`` and reused. Each page's queries run ``--runs`` times; a page's figure is
the p99 of its runs (each run: all its queries, one after another, as the page issues them), after
one untimed pass (a server's store is open and warm):

- overview: hourly buckets + traffic + the 20 newest misroutes;
- fleet: ``snapshots(t - 30 s, t)`` (the grid: the last snapshot per instance before ``t``) and
  ``snapshots(t - 1 h, t, instance)`` (one instance's metrics over time);
- topology: traffic;
- constraints: the window's snapshots read in 24 spans of one page each (the latch intervals), the
  latch events, ``constraint_stats``;
- decisions: a filtered search (model, latency range) page 1, its violations column (the window's
  constraint counts, then one search per constraint over the page's span), then page 2 from its
  cursor; decisions_by_violation: page 1 of the decisions in which a candidate broke kv-cache;
- experiments: the arms of the window, ``compare`` of the two, both arms' hourly buckets
  (``experiment_series``, forced requests left out), and the 200 newest traces' shadow decisions
  (one search);
- drilldown: ``get(request_id)`` of ``--lookups`` random ids (p99 over the lookups).

``--pages`` names the pages to time and render (default: all).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from bench.lookup import T0, generate, holds, request_id
from ingest import MAX_LIMIT, DuckDBTraceStore
from ingest.duckdb.derived import derive_missing
from schemas.experiments import CompareQuery
from schemas.queries import AggregateQuery, TraceFilter

CACHE = Path.home() / ".cache" / "routelens-bench"
DAY = timedelta(hours=24)


def add_snapshots(path: Path, scrape_s: float) -> int:
    """Add one snapshot per template instance every ``scrape_s`` over the day; return how many."""
    con = duckdb.connect(str(path))
    try:
        rows = con.execute("SELECT DISTINCT instance FROM instance_snapshots ORDER BY 1").fetchall()
        instances = [r[0] for r in rows]
        rounds = int(DAY.total_seconds() / scrape_s)
        con.execute(
            "INSERT OR IGNORE INTO instance_snapshots BY NAME SELECT s.* REPLACE ("
            " md5('bench' || r || s.instance)[:24] AS snapshot_id,"
            " ? + to_microseconds(CAST(r * ? * 1e6 AS BIGINT)) AS seen_at,"
            " ? + to_microseconds(CAST(r * ? * 1e6 AS BIGINT)) AS scraped_at)"
            " FROM range(?) g(r) JOIN (SELECT DISTINCT ON (instance) * FROM instance_snapshots ORDER BY instance) s"
            " ON TRUE ORDER BY seen_at",
            [T0, scrape_s, T0, scrape_s, rounds],
        )
        con.execute("INSERT OR REPLACE INTO routelens_meta VALUES ('bench_app_snapshots', ?)", [str(scrape_s)])
        con.execute("CHECKPOINT")
        return rounds * len(instances)
    finally:
        con.close()


def derive(path: Path) -> int:
    """Migrate the file (the store's derived columns) and fill those the generator left NULL.

    The generator copies template rows in SQL, around the sink that derives them; a store fed
    through the pipeline has them from the start.
    """
    DuckDBTraceStore(path).close()
    con = duckdb.connect(str(path))
    try:
        touched = derive_missing(con)
        con.execute("CHECKPOINT")
        return touched
    finally:
        con.close()


def ready(path: Path, n: int, scrape_s: float) -> bool:
    """True when ``path`` holds ``n`` traces over the day and this benchmark's snapshots."""
    if not holds(path, n, 24.0):
        return False
    con = duckdb.connect(str(path), read_only=True)
    try:
        row = con.execute("SELECT value FROM routelens_meta WHERE key = 'bench_app_snapshots'").fetchone()
    except duckdb.Error:
        return False
    finally:
        con.close()
    return row is not None and float(row[0]) == scrape_s


def p99(samples: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Return the milliseconds ``fn`` took and what it returned."""
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1e3, out


def pages(store: DuckDBTraceStore) -> dict[str, list[tuple[str, Callable[[], Any]]]]:
    """Each page's data queries over the 24 h window, in the order the page issues them."""
    day = TraceFilter(start=T0, end=T0 + DAY)
    moment = T0 + timedelta(hours=17, minutes=3)
    hot = TraceFilter(start=T0, end=T0 + DAY, model="qwen-72b", min_latency_ms=500.0, max_latency_ms=1200.0)
    cursor: dict[str, Any] = {}

    def page1() -> Any:
        page = store.search(hot, limit=50)
        cursor["next"], cursor["page"] = page.next_cursor, page
        return page

    def violations() -> Any:  # as app.ui.views.decisions.fetch_violations: one search per constraint name
        from app.ui.data.decisions import page_violations

        names = {s.constraint for s in store.constraint_stats(hot)}
        return page_violations(lambda f: [s.request_id for s in store.search(f, limit=1000).items], hot,
                               cursor["page"], names)

    def snapshot_spans() -> Any:  # as app.ui.views.constraints.fetch_intervals: 24 spans, one page each
        from app.ui.data.constraints import chunk_spans

        return [store.snapshots(lo, hi, limit=MAX_LIMIT) for lo, hi in chunk_spans(T0, T0 + DAY, 24)]

    arms = list(store.experiment_groups("arm", T0, T0 + DAY))[:2]  # A and B as the page picks them: busiest first
    return {
        "overview": [("buckets_1h", lambda: store.aggregate(AggregateQuery(filter=day, bucket="1h"))),
                     ("traffic", lambda: store.traffic(day)), ("misroutes", lambda: store.misroutes(day, 20))],
        "fleet": [("grid_snapshots", lambda: store.snapshots(moment - timedelta(seconds=30), moment)),
                  ("instance_snapshots", lambda: store.snapshots(moment - timedelta(hours=1), moment, "inst-3"))],
        "topology": [("traffic", lambda: store.traffic(day))],
        "constraints": [("snapshots_24_spans", snapshot_spans),
                        ("latch_events", lambda: store.events(T0, T0 + DAY, kind="latch")),
                        ("constraint_stats", lambda: store.constraint_stats(day))],
        "decisions": [("search_page1", page1), ("violations_page1", violations),
                      ("search_page2", lambda: store.search(hot, 50, cursor["next"]))],
        "decisions_by_violation": [("search_violation", lambda: store.search(
            TraceFilter(start=T0, end=T0 + DAY, violation="kv-cache"), limit=50))],
        "experiments": [("experiment_groups", lambda: store.experiment_groups("arm", T0, T0 + DAY)),
                        ("compare", lambda: store.compare(CompareQuery(a=arms[0], b=arms[1], start=T0, end=T0 + DAY))),
                        ("experiment_series_1h", lambda: store.experiment_series(  # both arms' hourly buckets
                            "arm", arms[0], arms[1], AggregateQuery(filter=day, bucket="1h"))),
                        ("shadow_sample", lambda: store.search(day, limit=200))],
    }


def main(argv: list[str]) -> int:
    """Generate (or reuse) the store, time every page, print the figures; the last line is JSON."""
    p = argparse.ArgumentParser(prog="python -m bench app")
    p.add_argument("--traces", type=int, default=10_000_000)
    p.add_argument("--runs", type=int, default=20, help="runs of each page")
    p.add_argument("--lookups", type=int, default=1000)
    p.add_argument("--scrape-s", type=float, default=1.0, help="seconds between two snapshots of an instance")
    p.add_argument("--db", help="the store file (default: a cache file under ~/.cache/routelens-bench)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--render-runs", type=int, default=3, help="AppTest runs of each page (Streamlit's render time)")
    p.add_argument("--no-render", action="store_true", help="skip the AppTest render times")
    p.add_argument("--pages", help="comma-separated pages to time and render (default: all)")
    args = p.parse_args(argv)
    chosen = set(args.pages.split(",")) if args.pages else None
    path = Path(args.db) if args.db else CACHE / f"app-{args.traces}.duckdb"
    if not ready(path, args.traces, args.scrape_s):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        print(f"generating {args.traces:,} traces in {path} ...", flush=True)
        t = time.perf_counter()
        generate(path, args.traces, 24.0)
        print(f"  {add_snapshots(path, args.scrape_s):,} snapshots", flush=True)
        print(f"  done in {time.perf_counter() - t:.0f} s, {path.stat().st_size / 1e9:.2f} GB", flush=True)
    t = time.perf_counter()
    if filled := derive(path):
        print(f"  derived columns of {filled:,} rows in {time.perf_counter() - t:.0f} s", flush=True)
    store = DuckDBTraceStore(path, read_only=True)
    out: dict[str, Any] = {}
    try:
        for name, queries in pages(store).items():
            if chosen is not None and name not in chosen:
                continue
            runs: list[float] = []
            per_query: dict[str, list[float]] = {q: [] for q, _ in queries}
            for _q, fn in queries:  # one untimed pass: the server's store is open and warm
                fn()
            for _ in range(args.runs):
                total = 0.0
                for q, fn in queries:
                    ms, _ = timed(fn)
                    per_query[q].append(ms)
                    total += ms
                runs.append(total)
            out[name] = {"p99_ms": round(p99(runs), 1), "p50_ms": round(statistics.median(runs), 1),
                         "queries": {q: round(p99(v), 1) for q, v in per_query.items()}}
            print(f"{name:12s} p99 {out[name]['p99_ms']:8.1f} ms  {out[name]['queries']}", flush=True)
        rng = random.Random(args.seed)
        lat = []
        for _ in range(args.lookups):
            ms, trace = timed(lambda: store.get(request_id(rng.randrange(args.traces))))
            assert trace is not None
            lat.append(ms)
        print(f"drilldown    p99 {p99(lat):8.2f} ms over {args.lookups} lookups", flush=True)
    finally:
        store.close()
    rendered = [p for p in RENDERED if chosen is None or p in chosen]
    render = {} if args.no_render else render_times(path, args.render_runs, request_id(0), rendered)
    print(json.dumps({"traces": args.traces, "pages": out, "drilldown_p99_ms": round(p99(lat), 2),
                      "render": render}))
    return 0


RENDERED = ["overview", "fleet", "topology", "constraints", "decisions", "trace_explorer", "experiments", "probes"]


def render_times(path: Path, runs: int, rid: str, rendered: list[str] = RENDERED) -> dict[str, dict[str, float]]:
    """Each page run whole by Streamlit's ``AppTest`` over the store file: the script's render time, p50/p99 ms.

    Queries included (the page's own, through its caches' first miss: each run is a fresh AppTest),
    over the last 24 h (``?window=24h``) with the clock moved to the end of the file's day
    (``time_machine``, ticking): the pages read "now" themselves, and at today's date the file's
    day would be outside every window and the pages empty. No live gateway, so the live parts
    show their "unavailable" state.
    """
    import os

    import time_machine
    from streamlit.testing.v1 import AppTest

    from app.reader import DB_ENV
    from app.ui import ENTRYPOINT

    os.environ[DB_ENV] = str(path)
    os.environ.pop("ROUTELENS_API_URL", None)
    out: dict[str, dict[str, float]] = {}
    with time_machine.travel(T0 + DAY - timedelta(minutes=1), tick=True):
        for page in rendered:
            samples = []
            for _ in range(runs):
                at = AppTest.from_file(str(ENTRYPOINT), default_timeout=120)
                at.query_params["window"] = "24h"
                at.run()
                if page == "trace_explorer":
                    at.query_params["request_id"] = rid
                t = time.perf_counter()
                at.switch_page(f"views/{page}.py").run()
                samples.append((time.perf_counter() - t) * 1e3)
                problems = [e.value for e in at.exception] + [e.value for e in at.error]
                if problems:
                    print(f"render {page}: {problems[0]}", flush=True)
            out[page] = {"p50_ms": round(statistics.median(samples), 1), "p99_ms": round(p99(samples), 1)}
            print(f"render {page:14s} p50 {out[page]['p50_ms']:8.1f} ms", flush=True)
    return out
