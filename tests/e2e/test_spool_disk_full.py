"""The spool's disk fills up under a running gateway: requests still answered, the state reported, nothing lost.

The spool lives on a 4 MiB tmpfs the test mounts (skipped where mounting is not allowed); DuckDB
and the quarantine live elsewhere. Once the gateway has started, a file fills the tmpfs; a burst
of requests then needs new spool segments the disk cannot give. The gateway answers every one,
holds their traces in memory, says so in ``/health`` and ``/metrics``; once the file is removed,
the spool is taken up again, the backlog drains, and the store holds one trace per answered
request with nothing quarantined.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from app.run.procs import free_port
from bench.soak import fill_disk
from tests.e2e.conftest import Proc, one_instance_config
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
BODY = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "a question " * 20}]}).encode()
_GAUGE = r"^{name} (\S+)$"


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "spool"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # /health is 503 while the spool takes nothing
        return exc.code, exc.read()


def _post(url: str) -> int:
    req = urllib.request.Request(url, data=BODY, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        return resp.status


def _gauge(gateway: str, name: str) -> float:
    found = re.search(_GAUGE.format(name=name), _get(f"{gateway}/metrics")[1].decode(), re.M)
    assert found, name
    return float(found.group(1))


def test_a_full_spool_disk_loses_nothing_and_stalls_nothing(tmp_path: Path, tmpfs: Path) -> None:
    inst, port = free_port(), free_port()
    py = one_instance_config(tmp_path / "routelens.yaml", port, inst, {
        "duckdb_path": str(tmp_path / "traces.duckdb"), "quarantine_dir": str(tmp_path / "quarantine"),
        "flush_interval_ms": 200, "spool": {"dir": str(tmpfs), "segment_bytes": 65536}})
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    gateway_proc: Proc | None = None
    try:
        fleet.wait_for("fleet ready")
        # The store in the gateway's process: its writes are slower than a store process's intake, so the
        # burst below backs up in the gateway's spool and needs new segments (the spool code is the same).
        gateway_proc = Proc([*py, "serve", "--workers", "1", "--store-in-process"])
        gateway_proc.wait_for("gateway ready")
        gateway, chat = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1/chat/completions"
        answered = [_post(chat) for _ in range(20)]
        filler = fill_disk(tmpfs)
        with ThreadPoolExecutor(16) as pool:  # faster than the store takes them: new segments are needed
            answered += list(pool.map(lambda _: _post(chat), range(400)))
        assert answered == [200] * 420
        status, body = _get(f"{gateway}/health")
        storage = json.loads(body)["storage"]
        assert status == 503 and storage["spool"].startswith("unavailable"), storage
        assert "trace spool unavailable (" in json.loads(body)["reason"], body
        assert _gauge(gateway, "routelens_spool_available") == 0
        # Records went to memory, not the spool (how many are still there depends on how fast the store is).
        assert _gauge(gateway, "routelens_traces_spooled_total") < _gauge(gateway, "routelens_traces_queued_total")
        filler.unlink()  # room again: the spool is tried again (every 5 s) and the backlog drains
        assert wait_until(lambda: _gauge(gateway, "routelens_spool_available") == 1
                          and _gauge(gateway, "routelens_traces_pending") == 0, 30)
        assert json.loads(_get(f"{gateway}/health")[1])["storage"]["spool"] == "ok"
    finally:
        if gateway_proc is not None:
            gateway_proc.stop()
        fleet.stop()
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
    try:
        ((stored,),) = con.execute("SELECT count(*) FROM traces").fetchall()
    finally:
        con.close()
    assert stored == 420  # every answered request, once
    assert not [p for p in tmp_path.glob("quarantine/*") if p.stat().st_size], "a record was quarantined"
    assert not any("Traceback" in line for line in gateway_proc.lines), "".join(gateway_proc.lines)[-2000:]
