"""``routelens store``: the trace store process (``serve`` starts one; run it alone to share one)."""

from __future__ import annotations

import argparse
import re

from app.cli._common import bind_problem, config_of, fail, log_settings_of, port
from app.run.logs import add_log_arguments


def _run(args: argparse.Namespace) -> int:
    from app.run.store import run_store
    from ingest import SinkError

    log = log_settings_of(args)  # a bad variable: refused before anything starts
    config = config_of(args)
    db = args.db or config.storage.duckdb_path
    try:
        run_store(config, host=args.host, port=args.port, db=db, log=log)
    except SinkError as exc:
        if config.storage.backend != "duckdb":
            fail(f"cannot open the trace store ({config.storage.backend}): {' '.join(str(exc).split())}")
        else:
            fail(_unopenable(db, exc, "--db" if args.db else "storage.duckdb_path"))
        return 2
    except OSError as exc:  # the port: the app built has been cleaned up (its writer closed) by run_app
        message = bind_problem(exc, args.host, args.port)
        if message is None:
            raise
        fail(message)
        return 2
    return 0


def _unopenable(db: str, exc: Exception, named: str) -> str:
    """One line: why the store cannot open ``db`` (another process writing it, most often)."""
    text = " ".join(str(exc).split())
    if "lock" not in text.lower():
        return f"cannot open the trace store {db} ({named}): {text}"
    pid = re.search(r"\(PID (\d+)\)", text)
    holder = f"process {pid.group(1)}" if pid else "another process"
    return (f"{db} ({named}) is written by {holder} (DuckDB admits one writer per file): stop it, "
            f"or point the store at another file")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``store``."""
    p = sub.add_parser("store", parents=[common], help="run the trace store: relay intake, DuckDB writer, read API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=port, default=8090)
    p.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    add_log_arguments(p)
    p.set_defaults(func=_run)
