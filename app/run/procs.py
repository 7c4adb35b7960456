"""Child processes for ``routelens demo``: start, wait until ready, stop the whole group.

A child must not outlive its parent however the parent ends. A clean end (return, Ctrl-C, SIGTERM,
SIGHUP) stops each child's process group; for the ends that run no code at all (``kill -9``, a
crash) each child asks the kernel, before it executes its program, for SIGTERM when its parent dies
(Linux ``prctl(PR_SET_PDEATHSIG)``, kept across ``exec``). The signal fires when the *thread* that
started the child ends, so children are started from the main thread.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from app.run.logs import JSON_LINE_START

__all__ = ["Child", "app_command", "descendant_running", "descendants", "die_with_parent", "free_port", "free_ports",
           "port_is_free", "reserve_ports", "stat_fields", "wait_http"]

_PR_SET_PDEATHSIG = 1
_ROOT = Path(__file__).resolve().parents[2]  # the folder our packages (app, router_core, ...) were imported from


def app_command(env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """``python -m app`` running the code this process runs, and ``env`` for it.

    ``-m`` alone puts the working folder first on the path: a child started in a folder that holds
    the sources beside an installed package (a container's ``/srv``) would import those sources,
    without the compiled extensions the installed package has. ``-P`` leaves the working folder
    out; when our own code is a source tree (a checkout, or another checkout a benchmark runs), it
    goes first on ``PYTHONPATH``, so the child runs that tree; an installed package is found as installed.
    """
    if (_ROOT / "pyproject.toml").is_file():
        old = env.get("PYTHONPATH")
        env = {**env, "PYTHONPATH": str(_ROOT) if not old else f"{_ROOT}{os.pathsep}{old}"}
    return [sys.executable, "-P", "-m", "app"], env
TAIL_LINES = 20  # output lines a child keeps for the message when it fails to start


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] = libc.prctl
    return prctl


_PRCTL = _load_prctl()  # loaded in the parent: the child, between fork and exec, only calls it


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first; None for a process that is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def descendants(pid: int) -> set[int]:
    """Every live (not zombie) process below ``pid``, read from ``/proc`` (empty off Linux)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit() and (fields := stat_fields(int(entry.name))) is not None and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def descendant_running(pid: int, match: Callable[[list[bytes]], bool]) -> int | None:
    """The first live process below ``pid`` (lowest pid) whose command line (its argv) ``match`` accepts."""
    for child in sorted(descendants(pid)):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if match(argv):
            return child
    return None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """Return a ``preexec_fn`` that makes the child get ``sig`` when its parent dies (None off Linux).

    The child also checks that its parent is still the one that forked it: a parent killed
    between ``fork`` and ``prctl`` would otherwise leave it orphaned for good.
    """
    if _PRCTL is None:
        return None
    prctl, parent = _PRCTL, os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return setup


def port_is_free(host: str, port: int) -> bool:
    """Return True when nothing listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (outgoing connections take their ports there)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports this process handed out or will bind itself (newest last, bounded): a port is free "right now"
# until its server binds it, so two calls a moment apart (serve: the store's, then the workers') could
# hand out the same one, and the later server to bind would find it in use.
_HANDED: collections.OrderedDict[int, None] = collections.OrderedDict()
_HANDED_MAX = 4096
_HANDED_LOCK = threading.Lock()


def reserve_ports(*ports: int) -> None:
    """Ports this process will bind itself (a gateway's configured port): :func:`free_port` never hands them out."""
    with _HANDED_LOCK:
        for port in ports:
            _HANDED[port] = None
            _HANDED.move_to_end(port)
        while len(_HANDED) > _HANDED_MAX:
            _HANDED.popitem(last=False)


def free_port(host: str = "127.0.0.1") -> int:
    """Return a port that is free right now, below the ephemeral range when it can, and not handed out before.

    A port the OS hands out for ``bind(0)`` is an ephemeral one: until the server binds it, any
    outgoing connection (a probe, a scrape, a client) may take it as its local port. Ports below
    that range are never taken that way. A port this process handed out already, or reserved
    (:func:`reserve_ports`), is not handed out again: its server may not have bound it yet.
    """
    port = _pick_free(host)
    reserve_ports(port)
    return port


def _pick_free(host: str) -> int:
    low = _ephemeral_low()
    if low > 11000:
        for port in random.sample(range(10000, low), 50):
            with _HANDED_LOCK:
                if port in _HANDED:
                    continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    for _ in range(20):  # an ephemeral port: the OS picks, and may pick one handed out (not yet bound) again
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        with _HANDED_LOCK:
            if port not in _HANDED:
                break
    return port


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """Return ``n`` distinct ports that are free right now (see :func:`free_port`)."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def wait_http(url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> bool:
    """Poll ``url`` until it answers 200, the deadline passes, or ``alive()`` turns False.

    Any child's ``/health`` (a simulated instance, the gateway, the store, Streamlit): a status
    code, not the store's API, so a bare ``urlopen`` rather than the store's client.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class Child:
    """One child process in its own process group, its output relayed with a prefix.

    Args:
        name: Prefix for its output lines.
        argv: The command.
        env: Its environment.
        ready_marker: A line prefix that means "ready" (None: ready once started).
        echo: Relay the child's output to our stdout (a JSON log line as it is: it names its process).
        death_signal: What the child gets when we die without stopping it (``kill -9``, a crash):
            SIGTERM lets it end cleanly; SIGKILL for a child with nothing to save whose clean end
            may take long (the prober, possibly inside a model load, relaying to a store now gone).
    """

    def __init__(
        self, name: str, argv: Sequence[str], env: dict[str, str], ready_marker: str | None, echo: bool = False,
        death_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        self._ready = threading.Event()
        self.was_ready = ready_marker is None  # it said its ready line (it may have exited since)
        self._marker = ready_marker
        self._echo = echo
        self._tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.proc = subprocess.Popen(
            list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True, preexec_fn=die_with_parent(death_signal),
        )
        if ready_marker is None:
            self._ready.set()
        threading.Thread(target=self._relay, name=f"relay-{name}", daemon=True).start()

    def _relay(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed at EOF (the child has gone), not left to the garbage collector
            for line in self.proc.stdout:
                self._tail.append(line.rstrip("\n"))
                if self._marker and line.startswith(self._marker):
                    self.was_ready = True
                    self._ready.set()
                if self._echo:
                    print(line if line.startswith(JSON_LINE_START) else f"[{self.name}] {line}", end="", flush=True)
        self.proc.wait()  # EOF comes a moment before the exit is reapable: alive() must see it
        self._ready.set()  # exited: wake any waiter; alive() tells it apart

    def tail(self) -> str:
        """Return its last output lines (at most ``TAIL_LINES``), for an error message."""
        return "\n".join(self._tail)

    def alive(self) -> bool:
        """Return True while the process runs."""
        return self.proc.poll() is None

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait for the ready line; False on timeout or exit."""
        return self._ready.wait(timeout_s) and self.alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL it if it has not gone within ``timeout_s``."""
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        except ProcessLookupError:
            pass
