"""The prober's cost: 200 simulated instances × 3 probes per period, one prober process.

Real processes on loopback: a zero-delay simulated fleet of ``--instances`` instances and
``routelens probes run`` probing it with a shortened period (``--period``). After one period of
warm-up (the embedding model loads, baselines start), the prober's CPU time is read from
``/proc/<pid>/stat`` over ``--periods`` periods; the semantic probe's duration p99 comes from its
stored results and the semantic scoring p99 (embedding the answers, waiting for the model included)
and the schedule slip p99 (how late a probe starts against its slot) from the prober's own
``GET /v1/probes/stats``, reset after the warm-up. The answer-embedding cache's hit rate matters for the CPU
figure (the simulator repeats its answers, as temperature-0 models do), so it is reported too.

With ``--gateway``, the gateway benchmark's load (``wrk`` c=1 and c=16) runs against ``serve``
with probes on and then off, same backend, same run, and the p99 deltas are printed.

Last line: ``{"instances": ..., "cpu_cores": ..., "semantic_p99_ms": ..., "slip_p99_ms": ..., ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from app.run.procs import Child, free_port
from sim.behaviour import builtin_config

_TICK = os.sysconf("SC_CLK_TCK")
_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the children's ready lines must not sit in a buffer


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def _free_range(n: int) -> int:
    """A base port with ``n`` free ports after it."""
    for base in range(20000, 60000 - n, 997):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} free ports in a row")


def _get(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def _p(values: list[float], q: float) -> float | None:
    values = sorted(values)
    return round(values[min(int(q * len(values)), len(values) - 1)], 3) if values else None


def measure_prober(tmp: Path, instances: int, period: float, periods: int) -> dict[str, Any]:
    """Run the fleet and the standalone prober; return CPU, semantic p99 and slip p99."""
    base = _free_range(instances)
    cfg = builtin_config(instances, base, zero_delay=True).model_dump(mode="json")
    port = free_port()
    cfg["storage"] = {"duckdb_path": str(tmp / "probes.duckdb")}
    cfg["probes"] = {"interval_s": period, "timeout_s": period, "max_concurrent": 32}
    path = tmp / "probes.yaml"
    path.write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(path)]
    env = _ENV
    fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
    prober = None
    try:
        assert fleet.wait_ready(120), "the fleet did not start"
        prober = Child("prober", [*py, "probes", "run", "--port", str(port)], env, "prober ready")
        assert prober.wait_ready(120), "the prober did not start"
        api = f"http://127.0.0.1:{port}"
        time.sleep(period)  # warm-up: the model loads, the first rounds run, baselines start
        _get(f"{api}/v1/probes/stats?reset=1")
        t0, c0, started = time.monotonic(), _cpu_s(prober.proc.pid), datetime.now(UTC)
        time.sleep(period * periods)
        cores = (_cpu_s(prober.proc.pid) - c0) / (time.monotonic() - t0)
        stats = _get(f"{api}/v1/probes/stats")
        ended = datetime.now(UTC)
        prober.stop()  # it stores what it holds on the way out; then its DuckDB file is ours to read
        prober = None
        results = _stored(tmp / "probes.duckdb", started, ended)
        semantic = [r["latency_ms"] for r in results if r["kind"] == "semantic"]
        return {"instances": instances, "period_s": period, "measured_s": round(period * periods, 1),
                "cpu_cores": round(cores, 3), "semantic_p99_ms": stats["semantic_scoring_p99_ms"],
                "semantic_p50_ms": stats["semantic_scoring_p50_ms"], "semantic_probe_p99_ms": _p(semantic, 0.99),
                "slip_p99_ms": stats["slip_p99_ms"],
                "slip_p50_ms": stats["slip_p50_ms"], "skipped": stats["skipped"], "answer_cache": stats["answer_cache"],
                "results": {k: sum(r["kind"] == k for r in results) for k in ("syntax", "latency", "semantic")},
                "expected_per_kind": int(instances * periods),
                "not_ok": sum(r["verdict"] != "ok" for r in results)}
    finally:
        if prober is not None:
            prober.stop()
        fleet.stop()


def _stored(db: Path, start: datetime, end: datetime) -> list[dict[str, Any]]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT kind, verdict, latency_ms FROM probe_results WHERE ts >= ? AND ts < ?",
                           [start, end]).fetchall()
    finally:
        con.close()
    return [{"kind": k, "verdict": v, "latency_ms": ms} for k, v, ms in rows]


def measure_gateway(tmp: Path, seconds: int) -> dict[str, Any]:
    """wrk c=1 and c=16 against serve with probes on (their defaults) and off, on the same backend."""
    from bench import wrk
    from bench.gateway import post_script

    inst = _free_range(4)
    fleet = Child("sim", [sys.executable, "-m", "app", "sim", "fleet", "--instances", "4", "--base-port", str(inst),
                          "--zero-delay"], _ENV, "fleet ready")
    out: dict[str, Any] = {}
    try:
        assert fleet.wait_ready(120)
        specs = builtin_config(4, inst, zero_delay=True).fleet.model_dump(mode="json")
        script = post_script(tmp)
        for label, probes in (("probes_off", {"enabled": False}), ("probes_on", {})):  # on: the defaults (30 s)
            gw = free_port()
            path = tmp / f"{label}.yaml"
            path.write_text(yaml.safe_dump({"gateway": {"port": gw}, "fleet": specs, "probes": probes,
                                            "storage": {"duckdb_path": str(tmp / f"{label}.duckdb")}}))
            child = Child(label, [sys.executable, "-m", "app", "--config", str(path), "serve", "--workers", "1"],
                          _ENV, "gateway ready")
            try:
                assert child.wait_ready(120)
                url = f"http://127.0.0.1:{gw}/v1/chat/completions"
                if label == "probes_on":  # steady state: the model loaded, every instance probed once
                    deadline = time.monotonic() + 120
                    while time.monotonic() < deadline:
                        feed = _get(f"http://127.0.0.1:{gw}/v1/probes/verdicts")["verdicts"]
                        if len(feed) == 4 and all(any(s["kind"] == "semantic" for s in v) for v in feed.values()):
                            break
                        time.sleep(0.5)
                time.sleep(5.0)
                wrk.run(url, script, 4, 2)
                out[label] = {f"c{c}": wrk.run(url, script, c, seconds, server_pid=child.proc.pid).figures()
                              for c in (1, 16)}
            finally:
                child.stop()
        for c in ("c1", "c16"):
            out[f"p99_delta_ms_{c}"] = round(out["probes_on"][c]["p99_ms"] - out["probes_off"][c]["p99_ms"], 3)
    finally:
        fleet.stop()
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench probes")
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--period", type=float, default=30.0, help="probe period (s), probes.interval_s's default")
    p.add_argument("--periods", type=int, default=2, help="periods measured after one of warm-up")
    p.add_argument("--gateway", action="store_true", help="also the gateway p99 with probes on versus off")
    p.add_argument("--seconds", type=int, default=8, help="each wrk run of --gateway")
    p.add_argument("--gateway-only", action="store_true", help="only the gateway part")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-probes-"))
    result: dict[str, Any] = {}
    if not args.gateway_only:
        result = measure_prober(tmp, args.instances, args.period, args.periods)
        print(json.dumps(result), file=sys.stderr, flush=True)  # kept even if the gateway part fails
    if args.gateway or args.gateway_only:
        result["gateway"] = measure_gateway(tmp, args.seconds)
    print(json.dumps(result))
    return 0
