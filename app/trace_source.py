"""Where the app reads one trace from: the server's read API, or a DuckDB file offline.

DuckDB admits one writing process per file, so while ``routelens serve`` runs the app asks its
HTTP API; a copied file nobody writes can be opened read-only instead (DESIGN, Processes).
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from schemas.errors import RoutelensError
from schemas.trace import DecisionTrace

__all__ = [
    "DEFAULT_API_URL",
    "DuckDBFileSource",
    "HttpTraceSource",
    "TraceSource",
    "TraceSourceError",
    "source_from_env",
]

DEFAULT_API_URL = "http://127.0.0.1:8080"
_MAX_BODY = 16 * 1024 * 1024
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class TraceSourceError(RoutelensError):
    """The trace source could not answer: unreachable, an unexpected status, or a bad trace."""


class TraceSource(Protocol):
    """Looks up one decision trace by request id."""

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the trace of ``request_id``, or None when the source has none.

        Raises:
            TraceSourceError: The source could not be asked or gave an unusable answer.
        """
        ...


class HttpTraceSource:
    """Reads traces from the RouteLens read API (``GET /v1/traces/{request_id}``).

    Args:
        api_url: Base URL of the server, e.g. ``http://127.0.0.1:8080``.
        timeout_s: Connect and read timeout of one request, in seconds.
    """

    def __init__(self, api_url: str, timeout_s: float = 3.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout_s = timeout_s
        # A proxy from the environment would swallow loopback traffic (only no_proxy exempts it).
        is_local = urllib.parse.urlsplit(self.api_url).hostname in _LOOPBACK
        handlers = [urllib.request.ProxyHandler({})] if is_local else []
        self._opener = urllib.request.build_opener(*handlers)

    def url_for(self, request_id: str) -> str:
        """Return the URL of one trace; the id is quoted, slashes included."""
        return f"{self.api_url}/v1/traces/{urllib.parse.quote(request_id, safe='')}"

    def get(self, request_id: str) -> DecisionTrace | None:
        """Fetch and validate one trace; 404 means unknown.

        Raises:
            TraceSourceError: Connection failure, timeout, any status but 200/404, or a body
                that is not a valid trace.
        """
        url = self.url_for(request_id)
        req = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with self._opener.open(req, timeout=self.timeout_s) as resp:
                body = resp.read(_MAX_BODY)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 404:
                return None
            raise TraceSourceError(f"GET {url} returned HTTP {exc.code} {exc.reason}") from exc
        except (OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise TraceSourceError(f"trace API at {self.api_url} is unreachable: {reason}") from exc
        try:
            return DecisionTrace.model_validate_json(body)
        except ValidationError as exc:
            raise TraceSourceError(f"GET {url} returned an invalid trace: {exc}") from exc


class DuckDBFileSource:
    """Reads traces from a DuckDB file opened read-only, for offline analysis.

    The file is opened per lookup and closed again, so the app never holds a lock on it.

    Args:
        path: The DuckDB trace file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def get(self, request_id: str) -> DecisionTrace | None:
        """Look the trace up in the file.

        Raises:
            TraceSourceError: The file is missing, cannot be opened or holds an invalid trace.
        """
        if not self.path.is_file():
            raise TraceSourceError(f"trace file {self.path} does not exist")
        try:
            import duckdb

            from ingest import DuckDBTraceStore
        except ImportError as exc:
            raise TraceSourceError(f"the DuckDB trace store is not available: {exc}") from exc
        try:
            store = DuckDBTraceStore(self.path, read_only=True)
        except RoutelensError as exc:
            raise TraceSourceError(str(exc)) from exc
        try:
            return store.get(request_id)
        except (duckdb.Error, ValidationError) as exc:
            raise TraceSourceError(f"cannot read {request_id!r} from {self.path}: {exc}") from exc
        finally:
            store.close()


def source_from_env(environ: Mapping[str, str] | None = None) -> TraceSource:
    """Choose the trace source from the environment.

    ``ROUTELENS_DB`` (a DuckDB file path) wins; otherwise ``ROUTELENS_API_URL``, defaulting to
    :data:`DEFAULT_API_URL`.

    Args:
        environ: The variables to read; ``os.environ`` when None.
    """
    env = os.environ if environ is None else environ
    db = env.get("ROUTELENS_DB", "").strip()
    if db:
        return DuckDBFileSource(db)
    return HttpTraceSource(env.get("ROUTELENS_API_URL", "").strip() or DEFAULT_API_URL)
