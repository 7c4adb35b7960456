"""A real ``redis-server`` for tests: a free loopback port, a temp dir, no persistence.

Use the ``redis_server`` fixture (import it into a conftest or a test module), or
:class:`RedisServer` directly; ``stop()`` then ``start()`` restarts it on the same port (a Redis
outage and its end). Tests that use it are skipped, with the reason, when ``redis-server`` is not
installed (``make install`` installs Debian's).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.run.procs import free_port

__all__ = ["REDIS_SERVER", "RedisServer", "redis_server", "requires_redis"]

REDIS_SERVER = shutil.which("redis-server") or next(
    (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).exists()), None)
requires_redis = pytest.mark.skipif(REDIS_SERVER is None,
                                    reason="redis-server not found (Debian package redis-server; make install)")


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port`` with ``dir`` for its working files."""

    def __init__(self, dir: Path, port: int | None = None) -> None:
        self.dir = dir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        """Start it and wait until it accepts connections."""
        assert REDIS_SERVER is not None
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited with {self.proc.returncode} on port {self.port}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise AssertionError(f"redis-server did not answer on port {self.port} within {timeout_s} s")

    def stop(self) -> None:
        """Kill it (SIGKILL: an outage, not a shutdown)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A running redis-server for one test (skipped when redis-server is not installed)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server not found (Debian package redis-server; make install)")
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()
