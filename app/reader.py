"""The one read path of ``routelens trace`` and the app: ingest's trace store, over HTTP or a file.

DuckDB admits one writing process per file, so while a server runs its query API is read
(:class:`ingest.HttpTraceStore`); a file that no process writes (a copy, or after the demo
stopped) is opened read-only (:class:`ingest.DuckDBTraceStore`). ``routelens app`` hands its
choice to the Streamlit process in :data:`DB_ENV` or :data:`API_ENV`.

A server whose ``storage.read_token_env`` is set answers its query API only with that token:
``routelens trace`` and ``routelens app`` read it from the variable the configuration names
(:func:`token_from_config`), and hand it to the app's process as :data:`READ_TOKEN_ENV`.

Everything here imports ``ingest`` on first use, so the command line starts fast.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ingest import DuckDBTraceStore, HttpTraceStore, TraceStore
    from schemas.trace import DecisionTrace

__all__ = [
    "API_ENV", "DB_ENV", "DEFAULT_API_URL", "READ_TIMEOUT_S", "READ_TOKEN_ENV", "api_from_env", "fetch_json",
    "find_trace", "is_otel_trace_id", "open_reader", "read_trace", "reader_from_env", "token_from_config",
]

DEFAULT_API_URL = "http://127.0.0.1:8080"
API_ENV = "ROUTELENS_API_URL"
DB_ENV = "ROUTELENS_DB"
READ_TOKEN_ENV = "ROUTELENS_READ_TOKEN"
# Someone waits on every lookup (a terminal, a page): fail fast when the server does not answer.
READ_TIMEOUT_S = 3.0


def token_from_config(config_path: str | Path) -> str | None:
    """The read token the configuration's ``storage.read_token_env`` names, else :data:`READ_TOKEN_ENV`'s value.

    None when neither gives one (or the configuration file does not exist).
    """
    name = READ_TOKEN_ENV
    if Path(config_path).is_file():
        from app.config import load_config

        name = load_config(config_path).storage.read_token_env or READ_TOKEN_ENV
    return os.environ.get(name, "").strip() or None


def open_reader(
    *, api: str | None = None, db: str | Path | None = None, token: str | None = None
) -> HttpTraceStore | DuckDBTraceStore:
    """Open a trace store for reading: the file ``db`` read-only if given, else the server at ``api``.

    Args:
        api: Base URL of a running server (default :data:`DEFAULT_API_URL`).
        db: A DuckDB trace file that no process writes.
        token: The server's read token; None: the value of :data:`READ_TOKEN_ENV`, if any.

    Raises:
        SinkError: The file does not exist or cannot be opened; ``SinkUnavailable`` when a
            process holds it for writing.
    """
    if db is None:
        from ingest import HttpTraceStore

        token = token if token is not None else os.environ.get(READ_TOKEN_ENV, "").strip() or None
        return HttpTraceStore(api or DEFAULT_API_URL, timeout_s=READ_TIMEOUT_S, token=token)
    from ingest import DuckDBTraceStore, SinkError

    path = Path(db)
    if not path.is_file():
        raise SinkError(f"trace file {path} does not exist")
    return DuckDBTraceStore(path, read_only=True)


def reader_from_env(environ: Mapping[str, str] | None = None) -> HttpTraceStore | DuckDBTraceStore:
    """Open the store the environment names: :data:`DB_ENV` wins, else :data:`API_ENV`, else the default.

    Args:
        environ: The variables to read; ``os.environ`` when None.

    Raises:
        SinkError: As :func:`open_reader`.
    """
    env = os.environ if environ is None else environ
    db = env.get(DB_ENV, "").strip()
    if db:
        return open_reader(db=db)
    return open_reader(api=env.get(API_ENV, "").strip().rstrip("/") or DEFAULT_API_URL,
                       token=env.get(READ_TOKEN_ENV, "").strip())


def read_trace(store: TraceStore, request_id: str) -> DecisionTrace | None:
    """Return the trace of ``request_id``, or None when the store has none.

    The stores raise :class:`ingest.SinkError` when they cannot answer; a stored or served trace
    that does not validate (and a body that is not JSON) comes out of them as a ``ValueError``,
    turned into a ``SinkError`` here so a caller handles one error.

    Raises:
        SinkError: The store is unreachable or gave an unusable answer.
    """
    from ingest import SinkError

    try:
        return store.get(request_id)
    except SinkError:
        raise
    except ValueError as exc:  # pydantic's ValidationError and orjson's JSONDecodeError included
        raise SinkError(f"{_where(store)} holds an invalid trace for {request_id!r}: {exc}") from exc


def is_otel_trace_id(value: str) -> bool:
    """Whether ``value`` is a W3C trace id (32 lower-case hex, not all zeros): what a tracing backend shows."""
    from schemas.trace import OTEL_TRACE_ID_PATTERN

    return re.fullmatch(OTEL_TRACE_ID_PATTERN, value) is not None and value != "0" * 32


def find_trace(store: TraceStore, key: str) -> DecisionTrace | None:
    """The trace of request ``key``; else, when ``key`` is a W3C trace id, the decision of that trace.

    An operator pastes the trace id their tracing backend (Jaeger, Tempo) shows for a slow request;
    it is found with ``GET /v1/traces?otel_trace_id=`` (the newest decision, should a client have
    sent several requests in one trace).

    Raises:
        SinkError: The store is unreachable or gave an unusable answer.
    """
    trace = read_trace(store, key)
    if trace is not None or not is_otel_trace_id(key):
        return trace
    from schemas.queries import TraceFilter

    found = store.search(TraceFilter(otel_trace_id=key), limit=1).items
    return read_trace(store, found[0].request_id) if found else None


def _where(store: TraceStore) -> str:
    url = getattr(store, "base_url", None)
    return f"the server at {url}" if url else f"the trace file {getattr(store, 'path', '?')}"


def api_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, str | None] | None:
    """The server the environment names, as ``(base_url, token)``; None when it names a DuckDB file.

    A file holds stored records only: live views (``/v1/alerts``, ``/v1/router/state``) need a server.

    Args:
        environ: The variables to read; ``os.environ`` when None.
    """
    env = os.environ if environ is None else environ
    if env.get(DB_ENV, "").strip():
        return None
    api = env.get(API_ENV, "").strip().rstrip("/") or DEFAULT_API_URL
    return api, env.get(READ_TOKEN_ENV, "").strip() or None


def fetch_json(api: str, path: str, token: str | None = None, timeout_s: float = READ_TIMEOUT_S) -> Any:
    """``GET`` one JSON document from a server's live API (e.g. ``/v1/alerts``), the token as a bearer.

    Through the store's one client (:meth:`ingest.HttpTraceStore.get_json`).

    Args:
        api: Base URL of the server.
        path: Path, with its query string if any.
        token: The server's read token, if it asks for one.
        timeout_s: Connect and read timeout.

    Raises:
        SinkUnavailable: The server does not answer.
        SinkError: It answered an HTTP error or a body that is not JSON.
    """
    from ingest import HttpTraceStore

    return HttpTraceStore(api, timeout_s=timeout_s, token=token).get_json(path)
