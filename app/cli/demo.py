"""``routelens demo``: fleet + gateway + app + a scripted day of traffic and faults, until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from app.cli._common import config_of, log_settings_of
from app.run.logs import add_log_arguments


def _run(args: argparse.Namespace) -> int:
    from app.run.demo import run_demo

    log = log_settings_of(args)  # a bad variable: refused before anything starts
    config = config_of(args)
    if args.data_dir is not None:  # another folder without another config (tests, a second demo)
        path = os.path.join(os.path.abspath(args.data_dir), "traces.duckdb")
        config = config.model_copy(update={"storage": config.storage.model_copy(update={"duckdb_path": path})})
    if args.speed <= 0 or (args.rps is not None and args.rps <= 0):
        print("error: --speed and --rps must be positive", file=sys.stderr)
        return 2
    kwargs = {} if args.script is None else {"script": Path(args.script)}
    return run_demo(config, with_app=not args.no_app, duration_s=args.duration, rps=args.rps, speed=args.speed,
                    log=log, **kwargs)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``demo``."""
    p = sub.add_parser("demo", parents=[common], help="fleet + gateway + app + a scripted day, until Ctrl-C")
    p.add_argument("--no-app", action="store_true", help="do not start the Streamlit app")
    p.add_argument("--duration", type=float, metavar="S",
                   help="stop by itself S seconds after the day begins (the parts start first: about 20 s, and "
                        "on a first run a minute more while the gateway fits the semantic intents)")
    p.add_argument("--rps", type=float,
                   help="the day's mean traffic rate at --speed 1 (default: the script's)")
    p.add_argument("--speed", type=float, default=1.0,
                   help="play the day this many times faster: its timeline, the router's timers and the traffic "
                        "(default: %(default)s)")
    p.add_argument("--script", metavar="DAY.yaml",
                   help="the day to play, a drill file whose faults name instances by index "
                        "(default: the packaged app/run/demo_day.yaml)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="keep the trace file, spool and derived config here (default: the folder of "
                        "storage.duckdb_path, .routelens/ beside the shipped config)")
    add_log_arguments(p)  # the gateway it starts logs the same
    p.set_defaults(func=_run)
