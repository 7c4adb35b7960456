"""The ``routelens`` command line: one module per command, listed in :data:`COMMANDS`.

Each command module ``app/cli/<name>.py`` has ``register(sub, common)``, which adds its parser
and sets ``func``. To add a command, write that module and add its name to :data:`COMMANDS`
(explicit, no import-time self-registration). The other modules here are shared by commands:
``_common`` (stderr console, configuration, gateway URL), ``config_io`` (reading the YAML) and
``trace_tree`` (one decision trace as a terminal tree).

Exit codes: 0 success, 1 "not found" (an unknown request id), 2 bad input or unreachable service.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from app.cli._common import err
from schemas.errors import ConfigError

__all__ = ["COMMANDS", "DEFAULT_CONFIG", "build_parser", "main"]

DEFAULT_CONFIG = "routelens.yaml"
COMMANDS = ["serve", "store", "sim", "trace", "app", "demo", "schema", "drill", "state", "ingest", "plugins", "probe",
            "probes", "compare", "replay", "policy", "intents"]


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every command of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="routelens", description="State-aware LLM routing with decision traces.")
    p.add_argument("--config", default=DEFAULT_CONFIG, help="configuration file (default: %(default)s)")
    # --config is accepted before or after the subcommand (`routelens sim fleet --config F`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="configuration file")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"app.cli.{name}").register(sub, common)
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
