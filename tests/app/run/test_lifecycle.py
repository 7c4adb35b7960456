"""Children end with their parent however it ends; one demo per data folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.run.demo import _lock_folder

PARENT = """
import sys, time
from app.run.procs import Child
child = Child("sleeper", [sys.executable, "-c", "import time; time.sleep(120)"], {}, None)
print(child.proc.pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_when_its_parent_is_killed_with_sigkill() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[3])
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert not _gone(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(child)
    finally:
        if not _gone(child):
            os.kill(child, signal.SIGKILL)
        parent.stdout.close()


def test_a_second_demo_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    first = _lock_folder(tmp_path)
    assert first is not None
    try:
        assert _lock_folder(tmp_path) is None
        assert (tmp_path / "demo.lock").read_text().strip() == str(os.getpid())
    finally:
        first.close()
    again = _lock_folder(tmp_path)  # released with its holder
    assert again is not None
    again.close()


def test_serve_ends_cleanly_on_sighup(tmp_path: Path) -> None:
    from app.run.procs import free_port

    port = free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(
        "fleet:\n  instances:\n"
        f"    - {{id: a, model: m, url: 'http://127.0.0.1:{free_port()}'}}\n"
        f"gateway: {{port: {port}}}\n"
        f"storage: {{duckdb_path: '{tmp_path / 't.duckdb'}'}}\n"
    )
    serve = subprocess.Popen([sys.executable, "-m", "app", "--config", str(cfg), "serve"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=Path(__file__).resolve().parents[3])
    assert serve.stdout is not None
    try:
        lines = []
        for line in serve.stdout:
            lines.append(line)
            if line.startswith("gateway ready"):
                break
        assert lines and lines[-1].startswith("gateway ready"), "".join(lines)
        serve.send_signal(signal.SIGHUP)
        assert serve.wait(30) == 0  # the SIGTERM path: the emitter closed, nothing killed
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(5)
        serve.stdout.close()
