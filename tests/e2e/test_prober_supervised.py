"""``routelens serve``'s prober process, killed, is started again on its port: probing and storing go on."""

from __future__ import annotations

import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from app.run.procs import descendant_running, free_port
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


def prober_pid(serve: int) -> int | None:
    """The pid of ``serve``'s prober (the child running ``probes run``)."""
    return descendant_running(serve, lambda argv: b"probes" in argv and b"run" in argv)


def syntax_results_since(gateway: str, since: datetime) -> list[dict[str, object]]:
    end = datetime.now(UTC) + timedelta(minutes=1)
    status, body = call("GET", f"{gateway}/v1/probes?start={quote(since.isoformat())}&end={quote(end.isoformat())}"
                               "&kind=syntax&limit=100")
    assert status == 200, body
    return list(body["results"])


def test_a_prober_that_dies_is_started_again(tmp_path: Path) -> None:
    port, inst = free_port(), free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "probes": {"interval_s": 0.5, "kinds": ["syntax"]},  # no embedding model to load
    }))
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    gateway = None
    try:
        fleet.wait_for("fleet ready")
        gateway = Proc([*py, "serve", "--workers", "1"])
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        first = prober_pid(gateway.proc.pid)
        assert first is not None, "".join(gateway.lines)
        os.kill(first, signal.SIGKILL)
        assert wait_until(lambda: prober_pid(gateway.proc.pid) not in (None, first), 30), "".join(gateway.lines)
        assert any("the prober process exited (code -9); starting it again" in line for line in gateway.lines)
        since = datetime.now(UTC)
        # the new prober probes and relays to the store: results newer than its start are stored
        assert wait_until(lambda: syntax_results_since(url, since), 30), "".join(gateway.lines[-20:])
        again = prober_pid(gateway.proc.pid)
    finally:
        if gateway is not None:
            gateway.stop()
        fleet.stop()
    assert again is not None and wait_until(lambda: not Path(f"/proc/{again}").exists(), 10), "prober outlived serve"
