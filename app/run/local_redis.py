"""A Redis for one ``routelens serve``'s workers, when they would otherwise each keep their own state.

With more than one gateway process and ``shared.backend: memory``, every worker would keep its own
throttles, rule buckets, budgets, breakers and bindings (a rule's ``max_rps`` becoming N times
itself). ``serve`` then starts Debian's ``redis-server`` on a Unix socket in the data folder (no
TCP port, no persistence, permissions 700), points every worker's ``shared`` section at it, and ends
it last, after the workers. The child dies with ``serve`` however ``serve`` ends (``kill -9``
included: :class:`app.run.procs.Child`'s parent-death signal), and is started again on the same
socket when it dies before (:class:`app.run.supervise.Supervised`; it starts empty: the workers
reconnect, and what they shared builds up again). Where it cannot start, ``serve`` runs one worker
and says why.

Its memory is capped (:data:`MAX_MEMORY`, ``maxmemory-policy volatile-lru``): the feedback claims
(``claim:verdict:<request id>``, 7 days each, about 180 bytes) are one key per verdict and would
otherwise grow for a week (10 GB at 100 verdicts a second). Only keys with a TTL are evicted, the
least recently used first: every key the workers share has one but ``server:id`` (which tells a
restarted, empty Redis), and a verdict claim is never read again once set, while buckets, budget
counters (re-read every ``refresh_s``), bindings (renewed at each request of their session), the
replicas' heartbeats and the kept breaker states are touched as long as they are in use, and the
claims of client request ids live 5 minutes. At the cap the oldest verdict claims go first: a
second verdict for a request id whose claim went (about 1.5 million verdicts back) is then refused
only by the worker that took the first one (it remembers its last 200,000).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
from pathlib import Path

from app.run.procs import Child
from app.run.supervise import Supervised
from schemas.config import RouteLensConfig

__all__ = ["MAX_MEMORY", "MAX_MEMORY_POLICY", "SOCKET_NAME", "start_local_redis", "with_shared_url"]

SOCKET_NAME = "redis.sock"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes; leave room
MAX_MEMORY = "256mb"  # about 1.5 million verdict claims (the module docstring)
MAX_MEMORY_POLICY = "volatile-lru"  # only keys with a TTL go, the least recently used first


def redis_argv(exe: str, folder: Path) -> list[str]:
    """The command line of the local Redis of ``folder``: its socket there, no TCP port, no persistence, capped."""
    sock = folder.resolve() / SOCKET_NAME
    return [exe, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--dir", str(folder.resolve()), "--loglevel", "warning",
            "--logfile", "", "--maxmemory", MAX_MEMORY, "--maxmemory-policy", MAX_MEMORY_POLICY]


def start_local_redis(folder: Path) -> tuple[Supervised | None, str]:
    """Start ``redis-server`` on ``folder/redis.sock``: ``(child, unix:// URL)``, or ``(None, why not)``.

    Once it has answered, it is started again whenever it dies, until ``serve`` stops it.
    """
    exe = shutil.which("redis-server")
    if exe is None:
        return None, "redis-server is not installed (apt-get install redis-server)"
    folder.mkdir(parents=True, exist_ok=True)
    sock = folder.resolve() / SOCKET_NAME
    if len(str(sock)) > _MAX_SOCKET_PATH:
        return None, f"the socket path {sock} is longer than a Unix socket allows"
    start = functools.partial(_redis_child, exe, folder)
    child = start()
    if not _wait_socket(sock, child):
        child.stop()
        return None, f"redis-server did not start on {sock}: {child.tail() or 'no output'}"
    return Supervised("redis", start, child=child), f"unix://{sock}"


def _redis_child(exe: str, folder: Path) -> Child:
    """``redis-server`` on ``folder/redis.sock``, the socket file of a dead one removed first."""
    (folder.resolve() / SOCKET_NAME).unlink(missing_ok=True)
    return Child("redis", redis_argv(exe, folder), dict(os.environ), ready_marker=None, death_signal=signal.SIGTERM)


def _wait_socket(sock: Path, child: Child, timeout_s: float = 10.0) -> bool:
    import socket
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.alive():
        if sock.exists():
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    s.connect(str(sock))
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return True
            except OSError:
                pass
        time.sleep(0.05)
    return False


def with_shared_url(config: RouteLensConfig, url: str) -> RouteLensConfig:
    """``config`` with its shared state in the Redis at ``url``."""
    shared = config.shared.model_copy(update={"backend": "redis", "url": url})
    return config.model_copy(update={"shared": shared})
