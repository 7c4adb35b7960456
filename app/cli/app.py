"""``routelens app``: the Streamlit app, reading traces from the gateway or a file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.markup import escape

from app.cli._common import api_url, err, port, read_error
from app.config import load_config
from app.reader import API_ENV, DB_ENV, READ_TOKEN_ENV, token_from_config
from app.ui import ENTRYPOINT

_CHECK_TIMEOUT_S = 2.0


def _check_token(url: str, token: str | None, args: argparse.Namespace) -> None:
    """Warn, naming the variable to set, when the server refuses the read token: every page would say 401."""
    from ingest import HttpTraceStore, SinkError, Unauthorized

    try:
        HttpTraceStore(url, timeout_s=_CHECK_TIMEOUT_S, token=token).get_json("/v1/traces?limit=1")
    except Unauthorized as exc:
        err.print(f"[yellow]warning:[/yellow] {escape(read_error(exc, args))}", soft_wrap=True)
    except SinkError:
        pass  # not up yet (the demo starts the app with its gateway), or a problem the pages show


def _check_file(db: Path, args: argparse.Namespace) -> None:
    """Warn when the pages cannot open ``db``: another process writes it (read through that one), or it is missing."""
    from app.reader import open_reader
    from ingest import SinkError

    try:
        open_reader(db=db).close()
    except SinkError as exc:  # the pages try again on each rerun: started all the same, as with a refused token
        err.print(f"[yellow]warning:[/yellow] {escape(read_error(exc, args))}", soft_wrap=True)


def _run(args: argparse.Namespace) -> int:
    cfg = load_config(args.config) if Path(args.config).is_file() else None
    port_ = args.port if args.port is not None else (cfg.app.port if cfg else 8501)
    host = cfg.app.host if cfg else "127.0.0.1"
    env = dict(os.environ)
    if cfg is not None:  # the pages read app settings (the fleet grid's thresholds) from here
        from app.ui.data.fleet import SETTINGS_ENV

        env[SETTINGS_ENV] = cfg.app.model_dump_json()
        env["ROUTELENS_CONFIG"] = str(Path(args.config).resolve())  # the decisions page's hash key name
    if args.db:
        env[DB_ENV] = str(Path(args.db).resolve())
        _check_file(Path(env[DB_ENV]), args)
    else:
        env.pop(DB_ENV, None)  # an inherited file would win over the URL asked for
        env[API_ENV] = api_url(args)
        token = token_from_config(args.config)
        if token is not None:
            env[READ_TOKEN_ENV] = token  # the app's reader sends it (app.reader.open_reader)
        _check_token(env[API_ENV], env.get(READ_TOKEN_ENV, "").strip() or None, args)  # what the pages send
    cmd = [sys.executable, "-P", "-m", "streamlit", "run", str(ENTRYPOINT), "--server.headless", "true",
           "--server.address", host, "--server.port", str(port_), "--browser.gatherUsageStats", "false",
           "--client.toolbarMode", "minimal"]
    print(f"app http://{host}:{port_}", flush=True)
    # Streamlit takes this process's place rather than becoming its child, so whoever stops this
    # process (or set it to die with its own parent: see app.run.procs) stops Streamlit.
    os.execve(cmd[0], cmd, env)


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``app``."""
    p = sub.add_parser("app", parents=[common], help="run the Streamlit app")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--api", help="gateway URL to read traces from")
    src.add_argument("--db", help="open a DuckDB file read-only instead")
    p.add_argument("--port", type=port, help="the app's port (default: app.port, else 8501)")
    p.set_defaults(func=_run)
