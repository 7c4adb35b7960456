"""``routelens sim ...``: the simulator."""

from __future__ import annotations

import argparse

from app.commands import config_of


def _fleet(args: argparse.Namespace) -> int:
    from sim.fleet import run_fleet

    run_fleet(config_of(args))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``sim`` and its subcommands."""
    sim = sub.add_parser("sim", parents=[common], help="the simulator").add_subparsers(
        dest="sim_command", required=True
    )
    fleet = sim.add_parser("fleet", parents=[common], help="run the configured fleet of simulated instances")
    fleet.set_defaults(func=_fleet)
