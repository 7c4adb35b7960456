"""``routelens store``: the trace store process (``serve`` starts one; run it alone to share one)."""

from __future__ import annotations

import argparse

from app.cli._common import config_of


def _run(args: argparse.Namespace) -> int:
    from app.run.store import run_store

    run_store(config_of(args), host=args.host, port=args.port, db=args.db)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``store``."""
    p = sub.add_parser("store", parents=[common], help="run the trace store: relay intake, DuckDB writer, read API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8090)
    p.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    p.set_defaults(func=_run)
