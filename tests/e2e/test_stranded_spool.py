"""A spool left by a worker that ``serve`` no longer runs (it ran more workers before) reaches the store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from app.run.procs import free_port
from app.run.storage import worker_paths
from ingest import Quarantine, RelaySink, TraceEmitter
from schemas.config import RouteLensConfig
from tests.e2e.conftest import Proc
from tests.e2e.net import call
from tests.factories import make_trace
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PY = [sys.executable, "-m", "app"]


def test_serve_with_fewer_workers_delivers_the_spools_of_the_others(tmp_path: Path) -> None:
    port = free_port()
    cfg = tmp_path / "routelens.yaml"
    cfg.write_text(yaml.safe_dump({
        "gateway": {"port": port}, "storage": {"duckdb_path": str(tmp_path / "traces.duckdb")},
        "fleet": {"instances": [{"id": "a", "model": "m", "url": f"http://127.0.0.1:{free_port()}"}]},
        "probes": {"enabled": False},
    }))
    config = RouteLensConfig.model_validate(yaml.safe_load(cfg.read_text()))
    # Worker 3 of an earlier serve --workers 4 spooled these, and its store went away before it could relay them.
    spool, quarantine = worker_paths(config.storage, str(tmp_path / "traces.duckdb"), 3)
    left = TraceEmitter(RelaySink(f"http://127.0.0.1:{free_port()}"), config.storage, spool_dir=spool,
                        quarantine=Quarantine(quarantine)).start()
    ids = [f"req_stranded{i:08d}" for i in range(5)]
    for rid in ids:
        left.emit(make_trace(rid))
    left.close(0.5)
    gateway = Proc([*PY, "serve", "--config", str(cfg), "--workers", "1"])
    try:
        gateway.wait_for("gateway ready http")
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: all(call("GET", f"{url}/v1/traces/{rid}")[0] == 200 for rid in ids), timeout_s=60), \
            "the stranded worker's traces never reached the store"
        assert "gateway-3's spool" in "".join(gateway.lines)
    finally:
        gateway.stop()
