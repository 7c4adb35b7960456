"""``routelens plugins``: every registered plugin type, as JSON, through the registry."""

from __future__ import annotations

import argparse
import json


def _run(args: argparse.Namespace) -> int:
    from router_core import builtin_registry

    print(json.dumps(builtin_registry().catalogue(), indent=2))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``plugins``."""
    p = sub.add_parser("plugins", parents=[common],
                       help='print the registered plugin types: [{"type", "extension_point"}, ...]')
    p.set_defaults(func=_run)
