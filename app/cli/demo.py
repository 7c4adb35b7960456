"""``routelens demo``: fleet + gateway + app + traffic, until Ctrl-C."""

from __future__ import annotations

import argparse

from app.cli._common import config_of


def _run(args: argparse.Namespace) -> int:
    from app.run.demo import run_demo

    return run_demo(config_of(args), with_app=not args.no_app, duration_s=args.duration, rps=args.rps)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``demo``."""
    p = sub.add_parser("demo", parents=[common], help="fleet + gateway + app + traffic, until Ctrl-C")
    p.add_argument("--no-app", action="store_true", help="do not start the Streamlit app")
    p.add_argument("--duration", type=float, help="stop by itself after this many seconds")
    p.add_argument("--rps", type=float, default=2.0, help="demo traffic rate (default: %(default)s)")
    p.set_defaults(func=_run)
