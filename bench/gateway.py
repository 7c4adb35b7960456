"""Gateway overhead: the same requests sent straight to a simulated instance and through the gateway.

Both run as real processes on loopback (the instance in zero-delay mode, so the figures measure the
gateway, not the model); the load comes from this process. Prints p50/p99 latency of sequential
requests and the throughput of concurrent ones, for each path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import yaml

from app.run.procs import Child, free_port

BODY = {"model": "auto", "messages": [{"role": "user", "content": "classify: 紧急 refund failed"}], "max_tokens": 16}


async def _latencies(url: str, n: int) -> list[float]:
    async with aiohttp.ClientSession() as s:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            async with s.post(url, json=BODY) as r:
                await r.read()
                assert r.status == 200, r.status
            out.append((time.perf_counter() - t0) * 1e3)
        return out


async def _throughput(url: str, n: int, concurrency: int) -> float:
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:
        async def one() -> None:
            async with sem, s.post(url, json=BODY) as r:
                await r.read()

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - t0)


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench gateway")
    p.add_argument("--requests", type=int, default=500, help="sequential requests per path")
    p.add_argument("--load", type=int, default=3000, help="concurrent requests per path")
    p.add_argument("--concurrency", type=int, default=32)
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-"))
    inst, gw = free_port(), free_port()
    cfg = {
        "gateway": {"port": gw},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb")},
        "fleet": {"instances": [{"id": "sim-0", "model": "m", "url": f"http://127.0.0.1:{inst}"}]},
        "sim": {"zero_delay": True},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
    }
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(tmp / "c.yaml")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
    gateway = None
    try:
        assert fleet.wait_ready(60), "fleet did not start"
        gateway = Child("gateway", [*py, "serve"], env, "gateway ready")
        assert gateway.wait_ready(60), "gateway did not start"
        direct = f"http://127.0.0.1:{inst}/v1/chat/completions"
        routed = f"http://127.0.0.1:{gw}/v1/chat/completions"
        asyncio.run(_latencies(routed, 50))  # warm up both paths
        d_lat = asyncio.run(_latencies(direct, args.requests))
        g_lat = asyncio.run(_latencies(routed, args.requests))
        d_rps = asyncio.run(_throughput(direct, args.load, args.concurrency))
        g_rps = asyncio.run(_throughput(routed, args.load, args.concurrency))
    finally:
        for child in (gateway, fleet):
            if child is not None:
                child.stop()
    result = {
        "requests": args.requests,
        "direct_p50_ms": round(statistics.median(d_lat), 3),
        "gateway_p50_ms": round(statistics.median(g_lat), 3),
        "overhead_p50_ms": round(statistics.median(g_lat) - statistics.median(d_lat), 3),
        "direct_p99_ms": round(_pct(d_lat, 99), 3),
        "gateway_p99_ms": round(_pct(g_lat, 99), 3),
        "concurrency": args.concurrency,
        "direct_rps": round(d_rps, 1),
        "gateway_rps": round(g_rps, 1),
    }
    print(json.dumps(result))
    return 0
