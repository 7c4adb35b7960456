"""What the commands share: the stderr console, the configuration and the gateway URL."""

from __future__ import annotations

import argparse
import errno
import os
import re
import socket
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from app.config import load_config
from app.reader import API_ENV, DEFAULT_API_URL, READ_TOKEN_ENV
from app.run.logs import BadLogSetting, LogSettings, log_settings
from schemas.config import RouteLensConfig

__all__ = ["BadInput", "Register", "api_url", "bind_problem", "check_bindable", "config_of", "err", "fail",
           "help_text", "http_url", "log_settings_of", "parse_time", "parse_window", "port", "port_or_zero",
           "positive_int", "read_error", "stdout_console", "written_elsewhere"]

Register = Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None]  # type: ignore[type-arg]

err = Console(stderr=True, highlight=False)
_PIPED_WIDTH = 200  # columns of a table written to a file or a pipe (rich's default there, 80, cuts cells to "…")


_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")  # :mod:`app.x`, :class:`~a.B`


def help_text(doc: str | None) -> str:
    """A module docstring as a command's ``--help`` shows it: reST roles and double backquotes as plain text."""
    text = _ROLE.sub(lambda m: f"`{m[1]}`", doc or "")
    return text.replace("``", "`")


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


class BadInput(ValueError):
    """Input a command refuses: ``main`` prints the message as one ``error:`` line and exits 2."""


def http_url(value: str, source: str) -> str:
    """``value`` without a trailing ``/``: an ``http://`` or ``https://`` URL with a host.

    Raises:
        BadInput: It is not one (``source``, the flag or variable it came from, is named).
    """
    try:
        parts = urllib.parse.urlsplit(value)
        _ = parts.port  # a port that is not a number (or is out of range) raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{source} {value!r} is not an http:// or https:// URL with a host "
                       "(e.g. http://127.0.0.1:8080)")
    return value.rstrip("/")


def api_url(args: argparse.Namespace) -> str:
    """Return the gateway URL: ``--api``, else ``$ROUTELENS_API_URL``, else the config, else the default.

    Raises:
        BadInput: ``--api`` or ``$ROUTELENS_API_URL`` is not an http(s) URL with a host.
    """
    if getattr(args, "api", None):
        return http_url(str(args.api), "--api")
    if os.environ.get(API_ENV):
        return http_url(os.environ[API_ENV], f"${API_ENV}")
    if Path(args.config).is_file():
        gw = load_config(args.config).gateway
        return f"http://{gw.host}:{gw.port}"
    return DEFAULT_API_URL


# DuckDB's refusal of a file another process holds: 'IO Error: Could not set lock on file "F": Conflicting
# lock is held in /usr/bin/python3.11 (PID 32495). See also https://duckdb.org/docs/...'
_LOCKED = re.compile(r'Could not set lock on file "(?P<path>[^"]+)"')
_HOLDER_PID = re.compile(r"\(PID (\d+)\)")


def written_elsewhere(exc: BaseException) -> str | None:
    """One line for a DuckDB file another process holds: the file, the holder's PID, and to read through it.

    None: ``exc`` is not that refusal. DuckDB lets no other process open a file while one writes it,
    so a command reading it (``trace``, ``replay``, ``compare``, ``app`` with ``--db``; ``trace``'s
    fallback to the configured file) is told to ask that process instead, over its query API.
    """
    text = " ".join(str(exc).split())
    found = _LOCKED.search(text)
    if found is None:
        return None
    pid = _HOLDER_PID.search(text)
    holder = f"another process (PID {pid[1]})" if pid else "another process"
    return (f"{found['path']} is in use by {holder}: a running RouteLens gateway or store? read it through "
            f"that process instead with --api URL (its gateway's or store's address)")


def read_error(exc: Exception, args: argparse.Namespace) -> str:
    """``exc``, a store's refusal to read, as one line; a 401 says which variable holds the read token.

    The token is the value of the variable ``storage.read_token_env`` of ``--config`` names, else of
    ``ROUTELENS_READ_TOKEN`` (:func:`app.reader.token_from_config`); a keyed gateway takes one of its keys there too.
    A DuckDB file another process writes says so, and to read it through that process (:func:`written_elsewhere`).
    """
    from ingest import Unauthorized

    if (held := written_elsewhere(exc)) is not None:
        return held
    text = str(exc)
    if not isinstance(exc, Unauthorized):
        return text
    configured = load_config(args.config).storage.read_token_env if Path(args.config).is_file() else None
    name = configured or READ_TOKEN_ENV
    where = f" (storage.read_token_env of {args.config})" if configured else ""
    if os.environ.get(name, "").strip():
        return f"{text}; the token in ${name}{where} is not one the server takes"
    return f"{text}; set ${name}{where} to the server's read token (or a gateway key)"


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


def port(text: str) -> int:
    """An argparse ``type=`` for a port flag: an integer 1-65535 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port number (1-65535)")
    return value


def positive_int(text: str) -> int:
    """An argparse ``type=`` for a count or size flag: an integer of at least 1 (argparse names the flag)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (at least 1)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def port_or_zero(text: str) -> int:
    """Like :func:`port`, also admitting 0 (bind a free port)."""
    if text.strip() == "0":
        return 0
    try:
        return port(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535, or 0 for a free one)") from None


_BIND_ERRORS = {errno.EADDRINUSE: "is in use", errno.EACCES: "needs privileges this process lacks",
                errno.EADDRNOTAVAIL: "cannot be bound: the host is not an address of this machine"}


def bind_problem(exc: OSError, host: str, port_: int, flag: str = "--port", *, binding: bool = False) -> str | None:
    """The one-line message of a failed listen on ``host:port_`` (None: ``exc`` is not a bind failure).

    ``binding``: ``exc`` is known to come from a bind; else only EADDRINUSE, or an error whose text
    names the address (aiohttp's "error while attempting to bind on address ..."), is one.
    """
    if not (binding or exc.errno == errno.EADDRINUSE or "address" in str(exc).lower()):
        return None
    why = _BIND_ERRORS.get(exc.errno or 0)
    if why is None and isinstance(exc, socket.gaierror):
        why = "cannot be bound: the host name does not resolve"
    return None if why is None else f"port {port_} on {host} {why} ({flag})"


def check_bindable(host: str, port_: int, flag: str = "--port") -> None:
    """Bind ``host:port_`` and let it go: refuse, before anything starts, a port another process listens on.

    Raises:
        BadInput: The port is in use, privileged, or ``host`` is not an address of this machine.
    """
    try:
        infos = socket.getaddrinfo(host, port_, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in infos[:1]:  # what the server binds first
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does: TIME_WAIT is free
                s.bind(address)
    except OSError as exc:
        message = bind_problem(exc, host, port_, flag, binding=True)
        if message is None:
            raise
        raise BadInput(message) from exc


def log_settings_of(args: argparse.Namespace) -> LogSettings:
    """``--log-level``/``--log-format``, else their variables (``serve``, ``store``, ``probes run``, ``demo``).

    Raises:
        BadInput: A variable read holds none of the choices (``main``: one line naming it, exit 2).
    """
    try:
        return log_settings(args.log_level, args.log_format, os.environ)
    except BadLogSetting as exc:
        raise BadInput(str(exc)) from None
