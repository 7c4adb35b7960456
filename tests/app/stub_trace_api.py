"""Test helpers shared by tests/app and tests/e2e: a stub read API (and the sample trace of tests/factories.py).

The stub is a real ``http.server`` on a loopback port serving ``GET /v1/traces/<id>`` the way
``routelens serve`` does: 200 with the trace JSON, 404 with the gateway's ``trace_not_found`` error
body for an unknown id.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from schemas import DecisionTrace
from tests.factories import (
    FALLBACK_REASON,
    KV_REASON,
    REJECTED_INSTANCE,
    SAMPLE_REQUEST_ID,
    SELECTED_INSTANCE,
    SELECTED_MODEL,
    TOP_RANKED,
)
from tests.factories import make_fallback_trace as sample_trace

__all__ = [
    "FALLBACK_REASON", "KV_REASON", "REJECTED_INSTANCE", "SAMPLE_REQUEST_ID", "SELECTED_INSTANCE", "SELECTED_MODEL",
    "TOP_RANKED", "StubTraceApi", "not_found", "sample_trace",
]


def not_found(request_id: str) -> bytes:
    """The gateway's answer for an unknown id (``router_core.gateway.errors.error_response``)."""
    message = f"no trace for request_id '{request_id}'"
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": "trace_not_found"}
    return json.dumps({"error": error}).encode()


class StubTraceApi:
    """A loopback HTTP server answering ``GET /v1/traces/<id>``; use as a context manager.

    ``responses`` maps an id to a canned ``(status, body)``, for error cases.

    Attributes:
        url: Base URL, e.g. ``http://127.0.0.1:54321``.
        requests: Paths requested so far, in order.
    """

    def __init__(
        self, traces: Iterable[DecisionTrace], responses: Mapping[str, tuple[int, bytes]] | None = None
    ) -> None:
        canned = {t.request_id: (200, t.model_dump_json().encode()) for t in traces}
        canned.update(responses or {})
        self.requests: list[str] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                prefix = "/v1/traces/"
                rid = urllib.parse.unquote(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
                status, body = canned.get(rid or "", (404, not_found(rid or "")))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="stub-trace-api", daemon=True
        )

    def __enter__(self) -> StubTraceApi:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
