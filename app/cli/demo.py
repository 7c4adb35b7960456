"""``routelens demo``: fleet + gateway + app + traffic, until Ctrl-C."""

from __future__ import annotations

import argparse
import os

from app.cli._common import config_of


def _run(args: argparse.Namespace) -> int:
    from app.run.demo import run_demo

    config = config_of(args)
    if args.data_dir is not None:  # another folder without another config (tests, a second demo)
        path = os.path.join(os.path.abspath(args.data_dir), "traces.duckdb")
        config = config.model_copy(update={"storage": config.storage.model_copy(update={"duckdb_path": path})})
    return run_demo(config, with_app=not args.no_app, duration_s=args.duration, rps=args.rps)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``demo``."""
    p = sub.add_parser("demo", parents=[common], help="fleet + gateway + app + traffic, until Ctrl-C")
    p.add_argument("--no-app", action="store_true", help="do not start the Streamlit app")
    p.add_argument("--duration", type=float, help="stop by itself after this many seconds")
    p.add_argument("--rps", type=float, default=2.0, help="demo traffic rate (default: %(default)s)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="keep the trace file, spool and derived config here (default: the folder of "
                        "storage.duckdb_path, .routelens/ beside the shipped config)")
    p.set_defaults(func=_run)
