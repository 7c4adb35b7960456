"""``routelens trace REQUEST_ID``: one decision as a tree (exit 1 unknown id, 2 no source)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from app.cli._common import api_url, err
from app.cli.config_io import load_config


def _run(args: argparse.Namespace) -> int:
    from app.cli.trace_tree import render_trace
    from app.trace_source import DuckDBFileSource, HttpTraceSource, TraceSource, TraceSourceError

    sources: list[TraceSource] = [DuckDBFileSource(args.db) if args.db else HttpTraceSource(api_url(args))]
    if not args.db and not args.api and Path(args.config).is_file():
        # No server running (e.g. after the demo stopped): the configured file can be read directly.
        db = Path(load_config(args.config).storage.duckdb_path)
        if db.is_file():
            sources.append(DuckDBFileSource(db))
    trace, errors = None, []
    for source in sources:
        try:
            trace = source.get(args.request_id)
        except TraceSourceError as exc:
            errors.append(str(exc))
            continue
        break
    else:
        err.print(f"[red]error:[/red] cannot read traces: {'; '.join(errors)}")
        return 2
    if trace is None:
        err.print(f"[red]error:[/red] no trace for request_id '{args.request_id}'")
        return 1
    if args.json:
        print(trace.model_dump_json(indent=2))
    else:
        Console().print(render_trace(trace))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``trace``."""
    p = sub.add_parser("trace", parents=[common], help="print one request's decision trace")
    p.add_argument("request_id")
    p.add_argument("--api", help="gateway URL (default: from the config, else http://127.0.0.1:8080)")
    p.add_argument("--db", help="read a DuckDB file that no process writes, instead of the API")
    p.add_argument("--json", action="store_true", help="print the trace as JSON")
    p.set_defaults(func=_run)
