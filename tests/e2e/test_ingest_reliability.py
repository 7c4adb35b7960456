"""Zero-loss ingestion with real processes: kill -9 under load, a locked DuckDB file, an
Elasticsearch outage (the contract server answering 503/429), an unwritable spool, a full disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from app.run.procs import free_port
from tests.duckdb_lock import duckdb_held_elsewhere
from tests.e2e.conftest import ROOT, Proc
from tests.e2e.net import call, drained, metrics, ok
from tests.ingest.es_contract.server import ContractServer
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PY = [sys.executable, "-m", "app"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fleet")
    instances = [{"id": f"m-{k}", "model": "m", "url": f"http://127.0.0.1:{free_port()}"} for k in "ab"]
    base = {"fleet": {"instances": instances}, "sim": {"time_scale": 50, "seed": 3},
            "scrape": {"interval_s": 0.5, "timeout_s": 0.5, "stale_after_s": 60}, "probes": {"enabled": False}}
    cfg = tmp / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(base))
    proc = Proc([*PY, "sim", "fleet", "--config", str(cfg)])
    try:
        proc.wait_for("fleet ready")
        yield base
    finally:
        proc.stop()


def gateway_config(tmp: Path, fleet: dict[str, Any], **storage: Any) -> tuple[Path, str]:
    port = free_port()
    cfg = {**fleet, "gateway": {"port": port, "max_attempts": 2},
           "storage": {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 200, **storage}}
    path = tmp / "routelens.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, f"http://127.0.0.1:{port}"


def start(cfg: Path, *flags: str) -> Proc:
    """``serve`` with one worker; by default with the store in its process: the spool and the sink these tests read.

    ``flags`` replace ``--store-in-process`` (none: the store in a process of its own, serve's default).
    """
    proc = Proc([*PY, "serve", "--config", str(cfg), "--workers", "1", *(flags or ("--store-in-process",))])
    proc.wait_for("gateway ready")
    return proc


def chat(url: str, rid: str | None = None) -> tuple[int, str | None]:
    headers = {"Content-Type": "application/json", **({"X-Request-Id": rid} if rid else {})}
    body = orjson.dumps({"model": "auto", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4})
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=20) as resp:
        resp.read()
        return resp.status, resp.headers["x-request-id"]


def stored(url: str, rid: str) -> bool:
    return ok(f"{url}/v1/traces/{rid}")


@pytest.mark.parametrize("store", ["in_process", "separate"])
def test_kill_9_under_load_loses_no_answered_request(fleet: dict[str, Any], tmp_path: Path, store: str) -> None:
    flags = ("--store-in-process",) if store == "in_process" else ("--separate-store",)
    cfg, url = gateway_config(tmp_path, fleet, flush_interval_ms=1000)
    gw = start(cfg, *flags)
    answered: list[str] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                status, rid = chat(url)
            except (OSError, urllib.error.URLError):
                return  # the gateway is gone
            if rid:
                answered.append(rid)

    threads = [threading.Thread(target=load, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    assert wait_until(lambda: len(answered) >= 150, 60, 0.01)
    os.killpg(gw.proc.pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(30)
    gw.stop()
    again = start(cfg, *flags)
    try:
        m = drained(url, 60)
        missing = [rid for rid in answered if not stored(url, rid)]
        assert (len(answered), missing) == (len(set(answered)), [])
        assert m.value("routelens_traces_replayed_total") > 0, m  # some answered traces were only in the spool
    finally:
        again.stop()


def test_a_locked_duckdb_file_spools_until_it_is_released(fleet: dict[str, Any], tmp_path: Path) -> None:
    cfg, url = gateway_config(tmp_path, fleet)
    db = tmp_path / "traces.duckdb"
    gw = None
    try:
        with duckdb_held_elsewhere(db):
            gw = start(cfg)
            ids = [chat(url, f"locked-{i}")[1] for i in range(25)]
            assert all(stored(url, str(rid)) for rid in ids)  # read-your-writes from the pending traces
            assert wait_until(lambda: metrics(url).value("routelens_traces_sink_errors_total") >= 2, 30)
            assert metrics(url).value("routelens_traces_written_total") == 0
        m = drained(url, 60)
        assert m.value("routelens_traces_written_total") == m.value("routelens_traces_queued_total")
        assert m.value("routelens_traces_dropped_total") == 0
    finally:
        if gw is not None:
            gw.stop()
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT count(*) FROM traces WHERE request_id LIKE 'locked-%'").fetchall()
    con.close()
    assert rows == [(25,)]


def test_an_elasticsearch_outage_is_ridden_out(fleet: dict[str, Any], tmp_path: Path) -> None:
    with ContractServer() as es:
        es.faults.whole = [503] * 4 + [429] * 3
        cfg, url = gateway_config(tmp_path, fleet, backend="elasticsearch",
                                  elasticsearch={"url": es.url, "max_retries": 2})
        gw = start(cfg)
        try:
            ids = [chat(url, f"es-{i}")[1] for i in range(20)]
            assert wait_until(lambda: es.count("routelens-traces") == 20, 90)
            assert sorted(es.engine.streams["routelens-traces"]) == sorted(ids)
            m = metrics(url)
            assert m.value("routelens_traces_sink_errors_total") >= 1 and m.value("routelens_traces_dropped_total") == 0
        finally:
            gw.stop()
        assert es.violations == []


def test_an_unwritable_spool_is_a_clear_error_a_metric_and_no_loss(fleet: dict[str, Any], tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    cfg, url = gateway_config(tmp_path, fleet, spool={"dir": str(blocker / "spool")})
    gw = start(cfg)
    try:
        ids = [chat(url, f"nospool-{i}")[1] for i in range(10)]
        m = drained(url, 30)
        assert m.value("routelens_spool_available") == 0 and m.value("routelens_traces_spool_errors_total") >= 1
        assert m.value("routelens_traces_spooled_total") == 0 and m.value("routelens_traces_dropped_total") == 0
        assert all(stored(url, str(rid)) for rid in ids)
    finally:
        gw.stop()
    assert any("is not usable" in line for line in gw.lines)


def test_a_full_disk_is_a_spool_full_error_not_a_crash(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes the kernel refuse to grow files, the way a full disk does (EFBIG here).
    script = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
        from ingest.errors import SpoolFull
        from ingest.spool.durable_spool import DurableSpool
        sp = DurableSpool({str(tmp_path)!r}, segment_bytes=1024 * 1024)
        try:
            sp.append(0, 1, b'{{}}')
        except SpoolFull as exc:
            print("SpoolFull:", exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("SpoolFull: cannot create spool segment") and "File too large" in out.stdout
    assert list(tmp_path.glob("*.seg")) == []  # the half-made segment was removed


def test_the_server_takes_traces_from_other_routers_and_answers_queries(fleet: dict[str, Any],
                                                                        tmp_path: Path) -> None:
    from bench.synthetic import TraceFactory

    cfg, url = gateway_config(tmp_path, fleet, intake_token_env="RL_TEST_INTAKE_TOKEN")
    os.environ["RL_TEST_INTAKE_TOKEN"] = "tok"
    try:
        gw = start(cfg)
    finally:
        del os.environ["RL_TEST_INTAKE_TOKEN"]
    try:
        traces = list(TraceFactory(seed=9, n_candidates=3).traces(5))
        body = b"\n".join(t.model_dump_json().encode() for t in traces) + b"\n{broken"
        status, out = call("POST", f"{url}/v1/traces", body, timeout=20,  # 207: a success with per-line verdicts
                           headers={"Authorization": "Bearer tok", "Content-Type": "application/x-ndjson"})
        assert status == 207 and out["accepted"] == 5 and out["results"]["rejected"][0]["line"] == 6
        assert all(stored(url, t.request_id) for t in traces)
        drained(url, 30)
        start_q = traces[0].ts.isoformat().replace("+00:00", "Z")
        status, page = call("GET", f"{url}/v1/traces?start={start_q}&limit=100")
        assert status == 200, page
        assert {i["request_id"] for i in page["items"]} == {t.request_id for t in traces}
    finally:
        gw.stop()
