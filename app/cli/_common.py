"""What the commands share: the stderr console, the configuration and the gateway URL."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from app.config import load_config
from app.reader import API_ENV, DEFAULT_API_URL
from schemas.config import RouteLensConfig

__all__ = ["BadInput", "Register", "api_url", "config_of", "err", "fail", "parse_time", "parse_window",
           "stdout_console"]

Register = Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None]  # type: ignore[type-arg]

err = Console(stderr=True, highlight=False)
_PIPED_WIDTH = 200  # columns of a table written to a file or a pipe (rich's default there, 80, cuts cells to "…")


def fail(message: str) -> None:
    """Print ``error: MESSAGE`` on stderr as written: no markup read in it, no line broken at the terminal's width.

    A pattern's ``[a-z0-9]`` was eaten as a tag; ``file:line: field`` stays one line to grep.
    """
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)


def stdout_console(*, highlight: bool = True) -> Console:
    """The console of a command's output: a terminal's width, or a wide one into a file or a pipe (COLUMNS rules)."""
    wide = not os.isatty(1) and "COLUMNS" not in os.environ
    return Console(highlight=highlight, width=_PIPED_WIDTH if wide else None)


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


class BadInput(ValueError):
    """Input a command refuses with exit code 2 (the message says why)."""


def parse_time(name: str, value: str) -> datetime:
    """Return ``value`` as an aware datetime (a time without a zone is UTC)."""
    try:
        ts = datetime.fromisoformat(value)
    except ValueError as exc:
        raise BadInput(f"{name} {value!r} is not an ISO 8601 time (e.g. 2026-11-01T09:00:00Z)") from exc
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def parse_window(since: str, until: str) -> tuple[datetime, datetime]:
    """Return ``--since`` and ``--until`` as aware datetimes, the second after the first.

    Raises:
        BadInput: Either is not ISO 8601, or the window is empty.
    """
    start, end = parse_time("--since", since), parse_time("--until", until)
    if end <= start:
        raise BadInput(f"--until ({end.isoformat()}) must be after --since ({start.isoformat()})")
    return start, end
