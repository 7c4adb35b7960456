"""A clean stop of ``serve --workers 2`` is quiet: every worker stops following the prober before the prober ends.

The audit's case: on every clean stop, worker 1 logged ``WARNING … probe verdicts … unavailable:
ClientConnectorError``. Only worker 0 (the ``serve`` process, which stops the prober) stopped
following it first; worker 1 was stopped after the prober had gone, and a poll in between failed.
Now the other workers end before the prober does; the order is read from ``/proc`` as they go.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

from app.run.procs import descendant_running, free_port, stat_fields
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until
from tests.redis_server import requires_redis

pytestmark = [pytest.mark.e2e, requires_redis]  # two workers share their state through a local Redis


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie not yet reaped included)."""
    fields = stat_fields(pid)
    return fields is None or fields[0] == "Z"


def test_the_other_workers_end_before_the_prober_and_nothing_is_warned(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "scrape": {"interval_s": 0.2, "stale_after_s": 30},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"], "hysteresis": {"fail_k": 1, "fail_n": 1}},
    }))
    py = [sys.executable, "-m", "app"]
    procs = [Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])]
    try:
        procs[0].wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--config", str(cfg), "--workers", "2"])
        procs.append(gateway)
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"

        def following() -> bool:  # a verdict taken, through whichever worker answers
            snap = call("GET", f"{url}/v1/router/state", headers={"Connection": "close"})[1]["instances"][0]
            return bool(snap["probes"])

        assert wait_until(following, 20)
        pid = gateway.proc.pid
        worker = descendant_running(pid, lambda argv: b"--worker" in argv
                                    and argv[argv.index(b"--worker") + 1:][:1] == [b"1"])
        prober = descendant_running(pid, lambda argv: b"probes" in argv and b"run" in argv)
        assert worker is not None and prober is not None
        said = len(gateway.lines)  # what start-up said is not this test's
        gateway.proc.terminate()  # a clean stop (SIGTERM), as Ctrl-C or systemd gives it
        ended: list[str] = []
        deadline = time.monotonic() + 30
        while len(ended) < 2 and time.monotonic() < deadline:
            ended += [name for name, p in (("worker 1", worker), ("prober", prober)) if name not in ended and gone(p)]
            time.sleep(0.005)
        assert gateway.proc.wait(30) == 0
        assert ended == ["worker 1", "prober"]  # the prober had ended first, worker 1 still polling it
        warned = [line for line in gateway.lines[said:] if "WARNING" in line or "unavailable" in line]
        assert warned == [], "".join(warned)
    finally:
        for p in reversed(procs):
            p.stop()
