"""``routelens sim traffic``'s exit code says whether the run reached the gateway at all.

Before, a run against a port nothing listens on printed ``4 requests, 4 errors`` and exited 0, as
did a run whose every request the gateway refused: a script could not tell a load test from no test.
Now nothing listening: exit 1 and one line naming the gateway; every request failed: exit 1 and a
line saying how; some failed: exit 0, the summary counting them by kind.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from app.cli import main
from app.run.procs import free_port
from sim.traffic import run_traffic
from sim.traffic_report import failure, format_traffic, summarise

ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}


class _Gateway(BaseHTTPRequestHandler):
    """A gateway on 127.0.0.1 that answers 503 to every chat request (``fail_every`` 1) or every other one (2)."""

    fail_every = 1
    chats = 0
    lock = threading.Lock()

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": []})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.lock:
            type(self).chats += 1
            n = type(self).chats
        if n % self.fail_every == 0:
            self._send(503, {"error": {"message": "overloaded", "type": "server_error"}})
        else:
            self._send(200, ANSWER)

    def log_message(self, *args: object) -> None:
        pass


def _serving(fail_every: int) -> Iterator[str]:
    handler = type("Handler", (_Gateway,), {"fail_every": fail_every, "chats": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def failing() -> Iterator[str]:
    yield from _serving(1)


@pytest.fixture
def half_failing() -> Iterator[str]:
    yield from _serving(2)


def _traffic(api: str, *extra: str) -> int:
    return main(["sim", "traffic", "--api", api, "--duration", "0.5",
                 "--rps", "8", "--no-feedback", *extra])


@pytest.fixture(autouse=True)
def _no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default --config is absent here: defaults, never the shipped file
    monkeypatch.delenv("ROUTELENS_API_URL", raising=False)


def test_nothing_listening_exits_1_with_one_line_naming_the_gateway(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    assert main(["sim", "traffic", "--api", closed, "--duration", "0.5", "--rps", "8"]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"error: the gateway at {closed} could not be reached (connection refused); "
                                "is it running? (--api)"]
    assert out == ""  # found before the run: no summary of requests never sent


def test_every_request_failing_exits_1_after_the_summary(
        failing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.json"
    assert _traffic(failing, "--json", str(summary)) == 1
    out, err = capsys.readouterr()
    n = json.loads(summary.read_text())["requests"]
    assert n > 0 and f"traffic: {n} requests, {n} errors" in out and f"errors: {n} HTTP 503" in out
    assert err.splitlines() == [f"error: all {n} requests to the gateway at {failing} failed ({n} HTTP 503)"]


def test_some_requests_failing_exit_0_and_are_counted_by_kind(
        half_failing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = tmp_path / "summary.json"
    assert _traffic(half_failing, "--json", str(summary)) == 0
    out, err = capsys.readouterr()
    figures = json.loads(summary.read_text())
    errors = figures["errors"]
    assert 0 < errors < figures["requests"] and figures["errors_by_kind"] == {"HTTP 503": errors}
    assert f"errors: {errors} HTTP 503" in out and err == ""


def test_a_run_that_never_connects_is_told_as_unreachable() -> None:
    """The gateway gone after the run started: every request refused, the summary's verdict says so."""
    closed = f"http://127.0.0.1:{free_port()}"
    summary = summarise(asyncio.run(run_traffic(closed, rps=50, count=3, timeout_s=2.0)))
    assert summary["errors_by_kind"] == {"no connection": 3}
    assert failure(summary, closed) == (f"the gateway at {closed} could not be reached: none of the 3 requests "
                                        "got a connection")
    assert "errors: 3 no connection" in format_traffic(summary)


def test_connections_cut_short_are_not_told_as_unreachable() -> None:
    """Something listens but closes every connection unanswered: the run failed, the gateway was reached."""
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def close_each() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # the listener closed: the test is over
                return
            conn.close()

    thread = threading.Thread(target=close_each, daemon=True)
    thread.start()
    try:
        summary = summarise(asyncio.run(run_traffic(url, rps=50, count=2, timeout_s=2.0)))
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (a close alone does not, on Linux)
        listener.close()
        thread.join()
    assert summary["errors_by_kind"] == {"connection dropped": 2}
    assert failure(summary, url) == f"all 2 requests to the gateway at {url} failed (2 connection dropped)"
