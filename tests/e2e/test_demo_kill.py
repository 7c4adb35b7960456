"""``kill -9`` of ``routelens demo``: within 2 s no child process is left and every port is free.

The demo cannot run any code when it is killed that way; its children asked the kernel to be told
(``PR_SET_PDEATHSIG``), and a second demo on the same data folder refuses while the first runs.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from app.run.procs import descendants, port_is_free, stat_fields
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.demo_run import start_demo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _alive(pid: int) -> bool:
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_kill_9_of_the_demo_leaves_no_child_and_frees_the_ports(tmp_path: Path) -> None:
    run = start_demo(tmp_path, "--rps", "5")
    demo, ports = run.proc, run.ports
    children: set[int] = set()
    try:
        assert len(ports) == 6, run.output  # four instances, the gateway, the app
        children = descendants(demo.proc.pid)
        assert len(children) >= 3, "fleet, gateway and app run as children"

        second = Proc([sys.executable, "-m", "app", "demo", "--config", str(ROOT / "routelens.yaml"),
                       "--data-dir", str(tmp_path), "--no-app"])
        assert second.proc.wait(60) == 1
        second.stop()
        said = "".join(second.lines)
        assert f"another routelens demo (pid {demo.proc.pid})" in said and "--data-dir DIR" in said
        assert "is taken" not in said  # the folder is checked before the ports: only the reason is printed

        os.kill(demo.proc.pid, signal.SIGKILL)
        demo.proc.wait(5)
        deadline = time.monotonic() + 15.0  # SIGTERM from the kernel, then each child's graceful shutdown
        while time.monotonic() < deadline:
            left = {pid for pid in children if _alive(pid)}
            taken = [p for p in ports if not port_is_free("127.0.0.1", p)]
            if not left and not taken:
                break
            time.sleep(0.05)
        assert not left, f"children left 15 s after kill -9: {[(pid, _cmdline(pid)) for pid in sorted(left)]}"
        assert not taken, f"ports still held 15 s after kill -9: {taken}"
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        demo.stop()
