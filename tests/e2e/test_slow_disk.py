"""A slow disk under a running gateway: every sync stalls for seconds, no request waits for one.

The gateway runs with ``slowdisk/slow_sync.c`` preloaded (built here with the system's C
compiler): while a gate file exists, every ``fsync``, ``fdatasync``, ``msync`` and
``sync_file_range`` of the process sleeps ``STALL_S`` before doing its work, as on a disk whose
flushes queue behind a saturated device. That covers the spool's ``interval`` flush (the
spool-keeper thread's ``msync``) and DuckDB's commits and checkpoints (its ``fdatasync``); the
shim logs each stall with its start and end on the monotonic clock this test also reads.

Traffic for ``TRAFFIC_S`` (paced clients, and bursts on top) then shows: every request answered
200; the syncs did stall, many times, with requests starting and ending inside those stalls;
no request took even half a stall. The request path makes no sync: ``emit()``'s budget is tens
of µs (p99 34-119 µs in docs/benchmarks.md, ``bench ingest``; 94 µs of CPU for the whole finish
stage in the stage budget), and a request is about 10 ms here, so a request path that waited
for one 2 s stall would miss the bound a hundredfold: no timing race. Once the disk is quick
again, the store holds one trace per answered request, none quarantined. Small segments make
the spool roll over (and retire segments) all through the stalls.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb
import pytest

from app.run.procs import free_port
from tests.e2e.conftest import Proc, one_instance_config
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
SHIM = Path(__file__).parent / "slowdisk" / "slow_sync.c"
STALL_S = 2.0
TRAFFIC_S = 14.0
CLIENTS, PAUSE_S = 6, 0.2  # paced clients: about 30 requests/s
BURST, BURST_EVERY_S = 16, 3.0  # and a burst of concurrent requests every few seconds
BODY = json.dumps({"model": "auto", "messages": [{"role": "user", "content": "a question " * 20}]}).encode()
Span = tuple[float, float]


@pytest.fixture
def slow_sync(tmp_path: Path) -> Path:
    """The shim, compiled into ``tmp_path``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the slow-disk shim tests/e2e/slowdisk/slow_sync.c")
    out = tmp_path / "slow_sync.so"
    built = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SHIM), "-ldl"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return out


def _post(url: str) -> tuple[int, float, float]:
    """POST one chat request; return (status, start, end) on the monotonic clock."""
    start = time.monotonic()
    req = urllib.request.Request(url, data=BODY, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        return resp.status, start, time.monotonic()


def _traffic(chat: str, seconds: float) -> list[tuple[int, float, float]]:
    """Paced clients plus periodic bursts for ``seconds``; every request's (status, start, end)."""
    done: list[tuple[int, float, float]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < deadline:
            got = _post(chat)
            with lock:
                done.append(got)
            time.sleep(PAUSE_S)

    def bursts(pool: ThreadPoolExecutor) -> None:
        while time.monotonic() < deadline:
            got = list(pool.map(lambda _: _post(chat), range(BURST)))
            with lock:
                done.extend(got)
            time.sleep(BURST_EVERY_S)

    with ThreadPoolExecutor(CLIENTS + 1 + BURST) as pool:
        futures = [pool.submit(client) for _ in range(CLIENTS)] + [pool.submit(bursts, pool)]
        for future in futures:
            future.result()  # a failed request fails the test here
    return done


def _stalls(log: Path) -> dict[str, list[Span]]:
    out: dict[str, list[Span]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        fn, start, end = line.split()
        out.setdefault(fn, []).append((float(start), float(end)))
    return out


def _inside(requests: list[tuple[int, float, float]], stalls: list[Span]) -> int:
    """How many requests started and ended while one of ``stalls`` was in progress."""
    return sum(any(s <= start and end <= e for s, e in stalls) for _, start, end in requests)


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: bytes = resp.read()
        return body


def _pending(gateway: str) -> float:
    found = re.search(r"^routelens_traces_pending (\S+)$", _get(f"{gateway}/metrics").decode(), re.M)
    assert found
    return float(found.group(1))


def test_a_slow_disk_stalls_no_request(tmp_path: Path, slow_sync: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inst, port = free_port(), free_port()
    db, quarantine, log = tmp_path / "traces.duckdb", tmp_path / "quarantine", tmp_path / "stalls.log"
    gate, spool = tmp_path / "disk-is-slow", tmp_path / "spool"
    py = one_instance_config(tmp_path / "routelens.yaml", port, inst, {
        "duckdb_path": str(db), "quarantine_dir": str(quarantine), "flush_interval_ms": 200,
        "spool": {"dir": str(spool), "segment_bytes": 65536, "fsync": "interval", "fsync_interval_ms": 200}})
    fleet = Proc([*py, "sim", "fleet", "--instances", "1", "--base-port", str(inst), "--zero-delay"])
    gateway_proc: Proc | None = None
    try:
        fleet.wait_for("fleet ready")
        with monkeypatch.context() as env:  # the gateway alone gets the slow disk
            env.setenv("LD_PRELOAD", str(slow_sync))
            env.setenv("SLOW_SYNC_SECONDS", str(STALL_S))
            env.setenv("SLOW_SYNC_GATE", str(gate))
            env.setenv("SLOW_SYNC_LOG", str(log))
            gateway_proc = Proc([*py, "serve", "--workers", "1"])
        gateway_proc.wait_for("gateway ready")
        gateway, chat = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1/chat/completions"
        warm = [_post(chat) for _ in range(10)]
        gate.touch()  # the disk turns slow
        requests = _traffic(chat, TRAFFIC_S)
        gate.unlink()  # quick again: the backlog drains, the shutdown checkpoints without stalls
        assert wait_until(lambda: _pending(gateway) == 0, 30)
    finally:
        gate.unlink(missing_ok=True)  # a failed test must not leave a gateway whose shutdown stalls
        if gateway_proc is not None:
            gateway_proc.stop()
        fleet.stop()
    answered = warm + requests
    assert [status for status, _, _ in answered] == [200] * len(answered)
    stalls = _stalls(log)
    msync, fdatasync = stalls.get("msync", []), stalls.get("fdatasync", []) + stalls.get("fsync", [])
    # The fault happened: the spool's flushes and DuckDB's commits each stalled, again and again,
    # while requests came and went.
    assert len(msync) >= 4 and len(fdatasync) >= 4, {fn: len(spans) for fn, spans in stalls.items()}
    assert all(end - start >= STALL_S * 0.99 for spans in stalls.values() for start, end in spans)
    # The spool rolled over to new segments (named by their first record) all along, stalls or not.
    newest = max(int(p.stem) for p in spool.glob("*.seg"))
    assert newest >= len(answered) // 2, newest
    during = {"msync": _inside(requests, msync), "fdatasync": _inside(requests, fdatasync)}
    assert min(during.values()) >= 50, during  # requests that started and ended inside a stall
    # No request waited for the disk.
    took = sorted(end - start for _, start, end in answered)
    slowest = took[-1]
    assert slowest < STALL_S / 2, f"a request took {slowest:.3f} s under a {STALL_S} s sync stall"
    con = duckdb.connect(str(db), read_only=True)
    try:
        ((stored,),) = con.execute("SELECT count(*) FROM traces").fetchall()
    finally:
        con.close()
    assert stored == len(answered)  # every answered request, once
    assert not [p for p in quarantine.glob("*") if p.stat().st_size], "a record was quarantined"
    assert not any("Traceback" in line for line in gateway_proc.lines), "".join(gateway_proc.lines)[-3000:]
    print(f"slow disk: {len(answered)} answered, stalls {({fn: len(s) for fn, s in stalls.items()})}, "
          f"requests inside a stall {during}, latency p50 {took[len(took) // 2] * 1e3:.1f} ms, "
          f"p99 {took[len(took) * 99 // 100] * 1e3:.1f} ms, max {slowest * 1e3:.1f} ms, {stored} traces stored, "
          f"newest segment from record {newest}")
