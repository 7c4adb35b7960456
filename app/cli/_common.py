"""What the commands share: the stderr console, the configuration and the gateway URL."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from app.cli.config_io import load_config
from app.reader import API_ENV, DEFAULT_API_URL
from schemas.config import RouteLensConfig

__all__ = ["Register", "api_url", "config_of", "err"]

Register = Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None]  # type: ignore[type-arg]

err = Console(stderr=True, highlight=False)


def config_of(args: argparse.Namespace) -> RouteLensConfig:
    """Load the configuration named by ``--config``."""
    return load_config(args.config)


def api_url(args: argparse.Namespace) -> str:
    """Return the gateway URL: ``--api``, else ``$ROUTELENS_API_URL``, else the config, else the default."""
    if getattr(args, "api", None):
        return str(args.api).rstrip("/")
    if os.environ.get(API_ENV):
        return os.environ[API_ENV].rstrip("/")
    if Path(args.config).is_file():
        gw = load_config(args.config).gateway
        return f"http://{gw.host}:{gw.port}"
    return DEFAULT_API_URL
