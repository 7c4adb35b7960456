"""``python -m bench replay``: re-decide N stored traces under another policy (``routelens replay`` over a file).

The traces are the router's own (:class:`bench.replay_traces.RouterTraceFactory`, 8 instances of
3 models, a scrape round every 64 requests, full detail): a template of ``--template`` traces is
written through the real sink, then replicated in DuckDB block after block, each block shifted
in time by the template's span with its own copies of the snapshots (new ids, ``scraped_at`` and
``seen_at`` shifted alike), so every replicated trace points at states as old as the template's.
The file is cached under ``~/.cache/routelens-bench``. The replay runs as the command runs it
(:func:`app.experiments.replay_range.replay_range`, one process per core) under the
``seed-instance-score`` preset against the recorded ``balanced``; a same-policy replay of the first
``--check`` traces must flip nothing. Prints one JSON line last; ``shadow`` holds
``bench.shadow.measure()`` when that module exists.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from app.experiments.replay_range import replay_range
from bench.replay_traces import T0, RouterTraceFactory, fleet_config
from ingest import DuckDBTraceStore
from ingest.codec.storage_schema import storage_schema
from ingest.duckdb.schema import sql_file
from ingest.kinds import Kind
from schemas.queries import TraceFilter

CACHE = Path.home() / ".cache" / "routelens-bench"
STEP = timedelta(milliseconds=10)


def _candidate_fields() -> list[str]:
    item = storage_schema(Kind.TRACE).field("candidates").type.value_type
    return [item.field(i).name for i in range(item.num_fields)]


def generate(path: Path, n: int, template: int) -> None:
    """Write ``n`` traces: ``template`` decided by the router, the rest replicated block by block."""
    store = DuckDBTraceStore(path)
    factory = RouterTraceFactory(step=STEP)
    for lo in range(0, min(n, template), 4096):
        store.write_records(list(factory.traces(min(4096, template - lo, n - lo))))
    store.close()
    span_us = int(template * STEP / timedelta(microseconds=1))
    con = duckdb.connect(str(path))
    # The sink stamps seen_at with the wall clock; a live store writes a snapshot when its scrape is
    # used, so it is first seen at the traces' time: the generated day is dated alike.
    con.execute("UPDATE instance_snapshots SET seen_at = scraped_at")
    con.execute("SET checkpoint_threshold = '1GB'")
    con.execute("DROP INDEX IF EXISTS traces_request_id_key")
    con.execute("DROP INDEX IF EXISTS instance_snapshots_id_key")
    own = "state_id := c.state_id || '-' || CAST(g.j AS VARCHAR)"
    fields = ", ".join(f'"{f}" := c."{f}"' if f != "state_id" else own for f in _candidate_fields())
    blocks = max(1, -(-n // template))
    for j in range(1, blocks):
        rows = min(template, n - j * template)
        con.execute(
            "INSERT INTO traces BY NAME SELECT t.* REPLACE ("
            " t.request_id || '-' || CAST(g.j AS VARCHAR) AS request_id,"
            " t.ts + to_microseconds(CAST(g.j AS BIGINT) * CAST(? AS BIGINT)) AS ts,"
            f" list_transform(t.candidates, lambda c: struct_pack({fields})) AS candidates)"
            " FROM (SELECT * FROM traces WHERE NOT contains(request_id, '-') ORDER BY ts LIMIT ?) t,"
            " (SELECT CAST(? AS BIGINT) AS j) g",
            [span_us, rows, j],
        )
        con.execute(
            "INSERT INTO instance_snapshots BY NAME SELECT s.* REPLACE ("
            " s.snapshot_id || '-' || CAST(? AS VARCHAR) AS snapshot_id,"
            " s.seen_at + to_microseconds(CAST(? AS BIGINT)) AS seen_at,"
            " s.scraped_at + to_microseconds(CAST(? AS BIGINT)) AS scraped_at)"
            " FROM instance_snapshots s WHERE NOT contains(s.snapshot_id, '-')",
            [j, j * span_us, j * span_us],
        )
        if j % 20 == 0:
            print(f"  generated {min(n, (j + 1) * template):,} / {n:,}", file=sys.stderr, flush=True)
    con.execute(sql_file("indexes.sql"))
    con.execute("CHECKPOINT")
    con.close()


def _columns(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in con.execute("DESCRIBE traces").fetchall()]


def _current_columns() -> list[tuple[str, str]]:
    """The ``traces`` columns a store of this code writes (a file of an older schema is regenerated)."""
    with tempfile.TemporaryDirectory() as tmp:
        DuckDBTraceStore(Path(tmp) / "empty.duckdb").close()
        con = duckdb.connect(str(Path(tmp) / "empty.duckdb"), read_only=True)
        try:
            return _columns(con)
        finally:
            con.close()


def holds(path: Path, n: int) -> bool:
    """True when ``path`` already holds ``n`` generated traces in the current storage schema."""
    if not path.exists():
        return False
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return False
    try:
        row = con.execute("SELECT count(*) FROM traces").fetchone()
        return bool(row and row[0] == n) and _columns(con) == _current_columns()
    except duckdb.Error:
        return False
    finally:
        con.close()


def _shadow() -> dict[str, Any] | None:
    try:
        module = importlib.import_module("bench.shadow")
    except ImportError:
        return None
    return dict(module.measure())


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench replay")
    p.add_argument("--traces", type=int, default=1_000_000)
    p.add_argument("--template", type=int, default=16_384, help="traces the router decides; the rest are copies")
    p.add_argument("--check", type=int, default=None,
                   help="same-policy replay of the first N traces (default: the template; 0: skip); the copies "
                        "carry new request ids, which break exact ties another way")
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--db", help="the generated file (default: cached under ~/.cache/routelens-bench)")
    args = p.parse_args(argv)
    path = Path(args.db) if args.db else CACHE / f"replay-{args.traces}-{args.template}.duckdb"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not holds(path, args.traces):
        path.unlink(missing_ok=True)
        print(f"generating {args.traces:,} traces in {path} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        generate(path, args.traces, args.template)
        print(f"  done in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    until = T0 + STEP * args.traces + timedelta(seconds=1)
    same_flips = None
    args.check = min(args.template, args.traces) if args.check is None else args.check
    if args.check:
        same = replay_range(path, T0, T0 + STEP * min(args.check, args.traces), TraceFilter(), fleet_config(),
                            workers=1)
        same_flips = same.flips
    report = replay_range(path, T0, until, TraceFilter(), fleet_config(preset="seed-instance-score"),
                          policy_name="seed-instance-score", workers=args.workers)
    out: dict[str, Any] = {
        "traces": report.n, "replayed": report.replayed, "traces_per_s": round(report.traces_per_s or 0.0),
        "flip_rate": round(report.flip_rate or 0.0, 4), "flip_ci": [round(x, 4) for x in report.flip_ci or ()],
        "elapsed_s": round(report.elapsed_s, 2), "not_replayable": report.not_replayable,
        # CPU per trace of the replaying processes, and what two idle cores would do at that cost
        # (this VM's cores are shared: the wall-clock figure above depends on what else runs).
        "cpu_us_per_trace": round(report.cpu_s / max(report.n, 1) * 1e6, 1),
        "traces_per_s_2_idle_cores": round(2 * report.n / report.cpu_s) if report.cpu_s else None,
        "same_policy_flips": same_flips, "same_policy_checked": min(args.check, args.traces) if args.check else 0,
        "top_cause": report.causes[0].model_dump() if report.causes else None,
    }
    shadow = _shadow()
    if shadow is not None:
        out["shadow"] = shadow
    print(f"replayed {report.replayed:,} of {report.n:,} traces in {report.elapsed_s:.1f} s "
          f"({out['traces_per_s']:,}/s), flip rate {out['flip_rate']:.3f}", file=sys.stderr)
    print(json.dumps(out))
    return 0 if same_flips in (None, 0) else 1
