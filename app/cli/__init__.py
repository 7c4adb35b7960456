"""The ``routelens`` command line: one module per command, listed in :data:`COMMANDS`.

Each command module ``app/cli/<name>.py`` has ``register(sub, common)``, which adds its parser
and sets ``func``. To add a command, write that module and add its name to :data:`COMMANDS`
(explicit, no import-time self-registration). The other modules here are shared by commands:
``_common`` (stderr console, configuration, gateway URL, :class:`~app.cli._common.BadInput`, which
``main`` prints as one ``error:`` line with exit code 2), ``trace_tree`` (one decision trace
as a terminal tree) and ``_sim_common`` (what the ``sim`` modules share). Two command modules keep a
part in a module of its own, which they import (no ``register``, not in :data:`COMMANDS`):
``sim_traffic`` (``sim traffic``) and ``intents_cases`` (the cases file of ``intents eval``).
The YAML is read by :mod:`app.config`, below the command line.

Exit codes: 0 success, 1 "not found" (an unknown request id), 2 bad input or unreachable service.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.cli._common import BadInput, fail
from schemas.errors import ConfigError

__all__ = ["COMMANDS", "DEFAULT_CONFIG", "build_parser", "config_problem", "main", "version"]

DEFAULT_CONFIG = "routelens.yaml"
COMMANDS = ["serve", "store", "sim", "trace", "app", "demo", "schema", "drill", "state", "ingest", "plugins", "probe",
            "probes", "compare", "replay", "policy", "intents"]

EPILOG = """examples:
  routelens demo                simulated fleet + gateway + app + traffic, until Ctrl-C
  routelens serve               run the gateway for the fleet in routelens.yaml
  routelens trace REQUEST_ID    print one request's decision trace
  routelens app                 run the Streamlit app on the gateway's traces
"""


def version() -> str:
    """The installed distribution's version; from pyproject.toml when running from an uninstalled tree."""
    try:
        return importlib.metadata.version("routelens")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"])


class _GivenConfig(argparse.Action):
    """``--config FILE``, remembered as given: a file the user names must be there (the default may be absent)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.config_given = True


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every command of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="routelens", description="State-aware LLM routing with decision traces.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    p.add_argument("--config", default=DEFAULT_CONFIG, action=_GivenConfig,
                   help="configuration file (default: %(default)s)")
    # --config is accepted before or after the subcommand (`routelens sim fleet --config F`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, action=_GivenConfig, help="configuration file")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"app.cli.{name}").register(sub, common)
    return p


def config_problem(exc: ConfigError, args: argparse.Namespace) -> str:
    """``exc`` as a command prints it; the default configuration missing said as such, in one line.

    Its own message would read ``routelens.yaml: cannot read: No such file or directory``, as if
    a file had been named: none was (a ``--config`` named and missing is refused before the command).
    """
    missing = (not getattr(args, "config_given", False) and not Path(args.config).exists()
               and os.path.abspath(exc.source) == os.path.abspath(args.config)
               and all(line is None for line, _, _ in exc.problems))
    return f"no {args.config} in {os.getcwd()}; --config FILE names another" if missing else str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    args = build_parser().parse_args(argv)
    if getattr(args, "config_given", False) and not Path(args.config).is_file():
        # a command reading routelens.yaml only when it is there would go on without it, on defaults
        fail(f"{args.config}: cannot read: no such configuration file (--config)")
        return 2
    try:
        return int(args.func(args))
    except BadInput as exc:  # a command's refusal of its input: one line, exit 2
        fail(f"{exc}")
        return 2
    except ConfigError as exc:
        fail(config_problem(exc, args))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `routelens ... | head` closed its end: stop quietly (Python's recipe, see signal)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush must not fail too
        return 1
