"""``routelens serve``: the gateway."""

from __future__ import annotations

import argparse

from app.cli._common import config_of


def _run(args: argparse.Namespace) -> int:
    from app.run.serve import run_server

    run_server(config_of(args), host=args.host, port=args.port, db=args.db)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``serve``."""
    p = sub.add_parser("serve", parents=[common], help="run the gateway")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    p.set_defaults(func=_run)
