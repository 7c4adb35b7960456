"""Issue #36: a crashed instance gets no attempt from 1 s after its crash until its breaker goes half-open.

Real processes on loopback: a simulated fleet of four instances of two models (as in the shipped
``routelens.yaml``) and ``serve --workers 1`` with the prober it starts; breakers, hedging and
scraping keep their defaults. A thread sends 25 requests/s; one instance crashes; afterwards the
stored traces and breaker events are read from the DuckDB file.

The crash is timed against the prober's first round, where the bug was: a crashed instance's
first probe verdicts are ``ok`` (one failed probe is not yet the ``fail_k`` a failed verdict
needs), and they were counted as probe passes that closed its open breaker within about 2 s, so
requests tried it again. With ``jitter: 0`` the round is the fleet in order, instance-major; the
victim is last, so its probes run just after the crash, inside the window.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from app.run.procs import free_ports
from bench.openloop import open_loop
from sim.corpus_data import QUERIES
from tests.e2e.conftest import Proc
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
RPS = 25


def _config(tmp: Path) -> tuple[Path, str, list[str], dict[str, str]]:
    """The shipped configuration on free ports, with its own store; no intents (the gateway starts sooner)."""
    cfg = yaml.safe_load((ROOT / "routelens.yaml").read_text())
    *ports, gw = free_ports(len(cfg["fleet"]["instances"]) + 1)
    for inst, port in zip(cfg["fleet"]["instances"], ports, strict=True):
        inst["url"] = f"http://127.0.0.1:{port}"
    cfg["gateway"]["port"] = gw
    cfg["storage"] = {"duckdb_path": str(tmp / "traces.duckdb"), "flush_interval_ms": 50}
    cfg["routing"]["policy"] = str(ROOT / cfg["routing"]["policy"])
    cfg["routing"].pop("intents", None)
    # One probe slot a second, in fleet order: the victim's three probes follow the instance before it.
    cfg["probes"] = {**cfg.get("probes", {}), "interval_s": 12, "jitter": 0}
    path = tmp / "routelens.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    ids = [str(i["id"]) for i in cfg["fleet"]["instances"]]
    return path, f"http://127.0.0.1:{gw}", ids, {str(i["id"]): str(i["url"]) for i in cfg["fleet"]["instances"]}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _load(url: str, stop: threading.Event, sent: list[tuple[float, int]]) -> None:
    """Open-loop corpus traffic at RPS until ``stop`` (seeded): (wall-clock send time, status) per request."""
    import aiohttp

    rng = random.Random(36)

    async def run() -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
            async def one() -> None:
                body = {"model": "auto", "max_tokens": 32,
                        "messages": [{"role": "user", "content": rng.choice(QUERIES).text}]}
                at = time.time()
                try:
                    async with session.post(url, json=body) as resp:
                        await resp.read()
                        sent.append((at, resp.status))
                except (aiohttp.ClientError, TimeoutError):
                    sent.append((at, 0))

            await open_loop(RPS, one, stop=stop)

    asyncio.run(run())


def _round_reaches(gateway: str, ids: list[str]) -> bool:
    """The instance before the last has every verdict the first one has (or the last has one already)."""
    verdicts = _get(f"{gateway}/v1/probes/verdicts")["verdicts"]
    kinds = len(verdicts.get(ids[0], []))
    return bool(verdicts.get(ids[-1])) or (kinds > 0 and len(verdicts.get(ids[-2], [])) >= kinds)


def test_a_crashed_instance_gets_no_attempt_until_its_breaker_is_half_open(tmp_path: Path) -> None:
    cfg, gateway, ids, urls = _config(tmp_path)
    victim = ids[-1]
    py = [sys.executable, "-m", "app", "--config", str(cfg)]
    fleet = Proc([*py, "sim", "fleet"])
    procs = [fleet]
    stop, sent = threading.Event(), []
    load = threading.Thread(target=_load, args=(f"{gateway}/v1/chat/completions", stop, sent))
    try:
        fleet.wait_for("fleet ready")
        serve = Proc([*py, "serve", "--workers", "1"])
        procs.append(serve)
        serve.wait_for("gateway ready", 60)
        load.start()
        assert wait_until(lambda: _round_reaches(gateway, ids), 40, every=0.05), _get(f"{gateway}/v1/probes/verdicts")
        req = urllib.request.Request(f"{urls[victim]}/admin/faults", data=json.dumps(
            {"kind": "crash", "duration_s": 60}).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 201
        crashed = time.time()

        def left_open() -> bool:  # the opened breaker moved on: half-open after open_s (or closed too soon)
            events = _get(f"{gateway}/v1/router/state")["breakers"]["events"]
            return any(e["message"].startswith(f"instance breaker {victim}: open -> ") for e in events)

        assert wait_until(left_open, 20, every=0.1), _get(f"{gateway}/v1/router/state")["breakers"]
        time.sleep(0.5)  # requests sent just before that finish
    finally:
        stop.set()
        if load.is_alive():
            load.join(30)
        for p in reversed(procs):
            p.stop()
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
    try:
        moves = con.execute("SELECT epoch(ts), message FROM router_events WHERE kind = 'breaker' AND message LIKE ? "
                            "ORDER BY ts", [f"instance breaker {victim}: %"]).fetchall()
        traces = con.execute("SELECT request_id, epoch(ts), [a.instance FOR a IN attempts], "
                             "[b.instance FOR b IN coalesce(inputs.blocked, [])] FROM traces ORDER BY ts").fetchall()
    finally:
        con.close()

    opened = [t for t, m in moves if ": closed -> open" in m]
    assert opened, moves
    after = [(t, m) for t, m in moves if t > opened[0]]
    # It stays open until its half-open trial (no probe verdict of the crashed instance closes it): the window's end.
    assert after and ": open -> half_open" in after[0][1], moves
    start, end = crashed + 1.0, after[0][0]
    assert any(victim in tried for _, ts, tried, _ in traces if ts < crashed), "the victim served nothing"
    window = [(rid, tried, blocked) for rid, ts, tried, blocked in traces if start <= ts < end]
    assert len(window) >= RPS, (len(window), end - start)  # at least a second of traffic in the window
    assert any(victim in blocked for _, _, blocked in window)  # it was a candidate, kept out by its breaker
    assert [rid for rid, tried, _ in window if victim in tried] == [], moves
    assert sent and all(status == 200 for _, status in sent), sorted({s for _, s in sent})
