"""The ``routelens`` command line.

Exit codes: 0 success, 1 "not found" (an unknown request id), 2 bad input or unreachable service.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from app.config_io import load_config
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError

__all__ = ["main"]

DEFAULT_CONFIG = "routelens.yaml"
err = Console(stderr=True, highlight=False)


def _config(args: argparse.Namespace) -> RouteLensConfig:
    return load_config(args.config)


def _cmd_serve(args: argparse.Namespace) -> int:
    from app.serve import run_server

    run_server(_config(args), host=args.host, port=args.port, db=args.db)
    return 0


def _cmd_sim_fleet(args: argparse.Namespace) -> int:
    from sim.fleet import run_fleet

    run_fleet(_config(args))
    return 0


def _api_url(args: argparse.Namespace) -> str:
    if args.api:
        return str(args.api).rstrip("/")
    if os.environ.get("ROUTELENS_API_URL"):
        return os.environ["ROUTELENS_API_URL"].rstrip("/")
    if Path(args.config).is_file():
        gw = load_config(args.config).gateway
        return f"http://{gw.host}:{gw.port}"
    return "http://127.0.0.1:8080"


def _cmd_trace(args: argparse.Namespace) -> int:
    from app.trace_source import DuckDBFileSource, HttpTraceSource, TraceSource, TraceSourceError
    from app.trace_tree import render_trace

    sources: list[TraceSource] = [DuckDBFileSource(args.db) if args.db else HttpTraceSource(_api_url(args))]
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


def _cmd_app(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if Path(args.config).is_file() else None
    port = args.port if args.port is not None else (cfg.app.port if cfg else 8501)
    host = cfg.app.host if cfg else "127.0.0.1"
    env = dict(os.environ)
    if args.db:
        env["ROUTELENS_DB"] = str(Path(args.db).resolve())
    else:
        env["ROUTELENS_API_URL"] = _api_url(args)
    entry = Path(__file__).with_name("streamlit_app.py")
    cmd = [sys.executable, "-m", "streamlit", "run", str(entry), "--server.headless", "true",
           "--server.address", host, "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal"]
    print(f"app http://{host}:{port}", flush=True)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from app.demo import run_demo

    return run_demo(_config(args), with_app=not args.no_app, duration_s=args.duration, rps=args.rps)


def _cmd_schema(args: argparse.Namespace) -> int:
    from schemas.derive import arrow_schema, json_schema

    if args.arrow:
        print(arrow_schema().to_string(show_schema_metadata=False))
    else:
        print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="routelens", description="State-aware LLM routing with decision traces.")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    # --config is accepted before or after the subcommand (`routelens sim fleet --config F`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", parents=[common], help="run the gateway")
    s.add_argument("--host")
    s.add_argument("--port", type=int)
    s.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    s.set_defaults(func=_cmd_serve)

    sim_parser = sub.add_parser("sim", parents=[common], help="the simulator")
    sim = sim_parser.add_subparsers(dest="sim_command", required=True)
    f = sim.add_parser("fleet", parents=[common], help="run the configured fleet of simulated instances")
    f.set_defaults(func=_cmd_sim_fleet)

    t = sub.add_parser("trace", parents=[common], help="print one request's decision trace")
    t.add_argument("request_id")
    t.add_argument("--api", help="gateway URL (default: from the config, else http://127.0.0.1:8080)")
    t.add_argument("--db", help="read a DuckDB file that no process writes, instead of the API")
    t.add_argument("--json", action="store_true", help="print the trace as JSON")
    t.set_defaults(func=_cmd_trace)

    a = sub.add_parser("app", parents=[common], help="run the Streamlit app")
    a.add_argument("--api", help="gateway URL to read traces from")
    a.add_argument("--db", help="open a DuckDB file read-only instead")
    a.add_argument("--port", type=int)
    a.set_defaults(func=_cmd_app)

    d = sub.add_parser("demo", parents=[common], help="fleet + gateway + app + traffic, until Ctrl-C")
    d.add_argument("--no-app", action="store_true", help="do not start the Streamlit app")
    d.add_argument("--duration", type=float, help="stop by itself after this many seconds")
    d.add_argument("--rps", type=float, default=2.0, help="demo traffic rate (default: %(default)s)")
    d.set_defaults(func=_cmd_demo)

    sc = sub.add_parser("schema", parents=[common], help="print the trace contract")
    fmt = sc.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON Schema (the default)")
    fmt.add_argument("--arrow", action="store_true", help="the derived Arrow schema")
    sc.set_defaults(func=_cmd_schema)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    except KeyboardInterrupt:
        return 130
