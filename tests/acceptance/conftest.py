"""A fresh ``git clone`` of this working tree, and ``make demo`` running in it, as a newcomer runs them.

The clone holds the committed tree plus the uncommitted edits to tracked files (``git diff HEAD``),
so an untracked or ignored file of this checkout cannot make a test pass while a developer's edit is
still tested. Its ``.venv`` is a symlink to the running virtualenv (``make`` would otherwise build
one), and every process runs with ``PYTHONPATH=<clone>`` so the clone's code is what runs (the
virtualenv's editable install points at this checkout). The shipped ``routelens.yaml`` is used as
committed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.run.procs import descendants

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.prefix)
START_TIMEOUT_S = 180  # fleet, gateway, Streamlit and the first traced request, on a busy machine
STOP_TIMEOUT_S = 60

_RID = re.compile(r"^  example request_id: (\S+)$")
_GATEWAY = re.compile(r"^  gateway  (http://\S+)")
_APP = re.compile(r"^  app      (http://\S+)")
_INSTANCE = re.compile(r"^  instance (\S+)\s+(http://\S+)$")


def _git(*args: str, input: bytes | None = None) -> bytes:
    done = subprocess.run(["git", *args], input=input, capture_output=True, timeout=120)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}"
    return done.stdout


@dataclass(frozen=True)
class Clone:
    """The fresh copy and the environment every process in it runs with."""

    path: Path
    env: dict[str, str]

    @property
    def python(self) -> Path:
        return self.path / ".venv" / "bin" / "python"

    @property
    def routelens(self) -> Path:
        return self.path / ".venv" / "bin" / "routelens"

    def run(self, argv: Sequence[str | Path], timeout_s: float = 60,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in argv], cwd=self.path, env=self.env, input=stdin,
                              capture_output=True, text=True, timeout=timeout_s)


def _newcomer_env(clone: Path) -> dict[str, str]:
    """Our environment without the virtualenv activated (a newcomer has not), the clone's code first."""
    venv_bin = (VENV / "bin").resolve()
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != venv_bin]
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONHOME"}}
    # unbuffered as on a terminal, so stdout and stderr lines come in the order they were written
    return {**env, "PATH": os.pathsep.join(path), "PYTHONPATH": str(clone), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Clone:
    path = (tmp_path_factory.mktemp("fresh") / "routelens").resolve()
    _git("clone", "--quiet", str(ROOT), str(path))
    diff = _git("-C", str(ROOT), "diff", "HEAD", "--binary", "--no-ext-diff", "--no-color")
    if diff.strip():
        _git("-C", str(path), "apply", "--allow-empty", input=diff)
    (path / ".venv").symlink_to(VENV, target_is_directory=True)
    fresh = Clone(path, _newcomer_env(path))

    shipped = _git("-C", str(ROOT), "show", "HEAD:routelens.yaml")
    assert (path / "routelens.yaml").read_bytes() == shipped, "the clone's routelens.yaml is not the committed one"
    where = fresh.run([fresh.python, "-c", "import app, bench; print(app.__file__); print(bench.__file__)"])
    assert where.returncode == 0, where.stderr
    assert all(Path(f).is_relative_to(path) for f in where.stdout.split()), f"not the clone's code: {where.stdout}"
    return fresh


class Demo:
    """``make demo`` in the clone, in its own session (as a terminal's foreground job), read line by line."""

    def __init__(self, clone: Clone) -> None:
        self.clone = clone
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen(
            ["make", "-o", ".venv/.installed", "demo"], cwd=clone.path, env=clone.env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name="make-demo-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                with self._cond:
                    self.lines.append(line.rstrip("\n"))
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    @property
    def output(self) -> str:
        with self._cond:
            return "\n".join(self.lines)

    def find(self, pattern: re.Pattern[str]) -> tuple[int, re.Match[str]] | None:
        """The first line matching ``pattern`` (its index and match), or None."""
        with self._cond:
            for i, line in enumerate(self.lines):
                if match := pattern.search(line):
                    return i, match
        return None

    def wait_for(self, pattern: re.Pattern[str], timeout_s: float) -> bool:
        """Wait until a line matches ``pattern``, the output ends, or ``timeout_s`` passes."""
        self.wait_until(lambda lines: any(pattern.search(line) for line in lines), timeout_s)
        return self.find(pattern) is not None

    def wait_until(self, seen: Callable[[list[str]], bool], timeout_s: float) -> None:
        """Wait until ``seen(lines)`` holds, the output ends, or ``timeout_s`` passes."""
        with self._cond:
            self._cond.wait_for(lambda: self._eof or seen(self.lines), timeout_s)

    def interrupt(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """Ctrl-C as a terminal sends it (SIGINT to the foreground process group); the exit code, None on timeout."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL whatever of it is left: make's group, everything below it, anything still in the clone."""
        left = descendants(self.proc.pid) | set(processes_in(self.clone.path))
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)
        self._reader.join(10)


@dataclass(frozen=True)
class Running:
    """What ``make demo`` printed once it was up."""

    request_id: str
    request_line: int  # index of the ``example request_id:`` line in the output
    gateway: str
    app: str
    instances: dict[str, str]  # id -> URL


def running(demo: Demo) -> Running:
    """The demo's printed URLs and request id; fails the test (with the output) when it printed none."""
    rid = demo.find(_RID)
    assert rid, f"make demo printed no 'example request_id:' line within {START_TIMEOUT_S} s:\n{demo.output}"
    gateway, app = demo.find(_GATEWAY), demo.find(_APP)
    assert gateway and app, f"no 'gateway  http://...' or 'app      http://...' line:\n{demo.output}"
    instances = {m.group(1): m.group(2) for line in demo.lines if (m := _INSTANCE.search(line))}
    assert instances, f"no 'instance ID URL' line:\n{demo.output}"
    return Running(rid[1].group(1), rid[0], gateway[1].group(1), app[1].group(1), instances)


def processes_in(folder: Path) -> dict[int, str]:
    """Every other process whose command line mentions ``folder`` or whose working directory is in it."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        if str(folder) in cmdline or Path(cwd or "/").is_relative_to(folder):
            found[int(entry.name)] = f"{cmdline} (cwd {cwd})"
    return found


@pytest.fixture(scope="module")
def demo(clone: Clone) -> Iterator[Demo]:
    """``make demo`` started in the clone and waited for (bounded) until it prints a request id."""
    started = Demo(clone)
    try:
        started.wait_for(_RID, START_TIMEOUT_S)
        yield started
    finally:
        started.kill()
