"""``routelens serve``: the gateway."""

from __future__ import annotations

import argparse
import os
from typing import Literal

from app.cli._common import (
    BadInput,
    bind_problem,
    check_bindable,
    config_of,
    fail,
    log_settings_of,
    port,
    positive_int,
)
from app.run.logs import add_log_arguments


def _workers(text: str) -> int | Literal["auto"]:
    """``--workers N|auto``: a count of at least 1, or one per core (at most 8), as ``gateway.workers``."""
    if text.strip() == "auto":
        return "auto"
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor a whole number of at least 1") from None


def _run(args: argparse.Namespace) -> int:
    from app.run.serve import run_server

    log = log_settings_of(args)  # a bad variable: refused before anything starts
    config = config_of(args)
    gateway = config.gateway if args.workers is None else config.gateway.model_copy(update={"workers": args.workers})
    workers = gateway.worker_count(os.cpu_count())
    if args.separate_store is False and args.workers is not None and workers > 1:
        raise BadInput("--store-in-process runs one worker: more workers relay to a store process")
    if args.separate_store is False:
        workers = 1
    host = args.host or config.gateway.host
    port_ = config.gateway.port if args.port is None else args.port
    flag = "--port" if args.port is not None else "gateway.port"
    try:
        if args.worker == 0:  # before the store, the Redis and the prober start (the workers share the port)
            check_bindable(host, port_, flag)  # its BadInput is main's: one line, exit 2
        run_server(config, config_path=args.config, host=args.host, port=args.port, db=args.db,
                   workers=workers, store_url=args.store_url, worker=args.worker,
                   separate_store=args.separate_store, probe_url=args.probe_url, shared_url=args.shared_url,
                   own_store=args.own_store, metrics_ports=args.metrics_ports, log=log)
    except OSError as exc:  # bound by another process after the check (run_server has stopped its children)
        message = bind_problem(exc, host, port_, flag)
        if message is None:
            raise
        fail(message)
        return 2
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``serve``."""
    p = sub.add_parser("serve", parents=[common], help="run the gateway")
    p.add_argument("--host")
    p.add_argument("--port", type=port)
    p.add_argument("--db", help="DuckDB trace file (default: storage.duckdb_path)")
    p.add_argument("--workers", type=_workers, metavar="N",
                   help="gateway processes sharing the port (SO_REUSEPORT), each with its own spool: at least 1, "
                   "or 'auto' = one per core, at most 8 (default: gateway.workers)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--separate-store", action="store_const", const=True, dest="separate_store",
                       help="run the trace store in a process of its own (default: storage.separate_process, true; "
                       "implied by --workers N>1)")
    where.add_argument("--store-in-process", action="store_const", const=False, dest="separate_store",
                       help="keep the trace store in the gateway's process (one worker only)")
    p.add_argument("--store-url", help="relay to this running `routelens store` instead of starting one")
    add_log_arguments(p)
    p.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)  # set for the workers serve starts
    p.add_argument("--probe-url", help=argparse.SUPPRESS)  # the prober serve started, for its workers
    p.add_argument("--shared-url", help=argparse.SUPPRESS)  # the Redis serve started, for its workers
    p.add_argument("--own-store", action="store_true", help=argparse.SUPPRESS)  # --store-url is serve's own store
    p.add_argument("--metrics-ports", type=_ports, default=(), help=argparse.SUPPRESS)  # each worker's own series
    p.set_defaults(func=_run)


def _ports(text: str) -> list[int]:
    """``--metrics-ports 8101,8102``: every worker's private metrics port, by worker number."""
    return [port(p) for p in text.split(",")]


