"""The ``routelens`` command line: builds the parser from :mod:`app.commands` and runs one command.

Exit codes: 0 success, 1 "not found" (an unknown request id), 2 bad input or unreachable service.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from app.commands import COMMANDS, err
from schemas.errors import ConfigError

__all__ = ["DEFAULT_CONFIG", "build_parser", "main"]

DEFAULT_CONFIG = "routelens.yaml"


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every command of :data:`app.commands.COMMANDS`."""
    p = argparse.ArgumentParser(prog="routelens", description="State-aware LLM routing with decision traces.")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    # --config is accepted before or after the subcommand (`routelens sim fleet --config F`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"app.commands.{name}").register(sub, common)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    except KeyboardInterrupt:
        return 130
