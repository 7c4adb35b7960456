"""Simulator throughput: one zero-delay fleet process with 16 instances, loaded from other processes.

``python -m bench sim [--requests N] [--concurrency C] [--workers W]`` starts
``routelens sim fleet --instances 16 --base-port P --zero-delay`` as a child, then W load processes
(``python -m bench sim --worker ...``) that each send N/W non-streaming chat requests spread over
the 16 instances with aiohttp, at most C in flight per worker. Bounded in count and in time. The last
line is one JSON object: ``{"instances": 16, "rps": ..., ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import aiohttp

from app.run.procs import Child, free_port, port_is_free

INSTANCES = 16
BODY = {"model": "auto", "messages": [{"role": "user", "content": "工单分类：客户投诉手机银行登录后页面空白。"}],
        "max_tokens": 16}


def _base_port(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + count < 65535 and all(port_is_free("127.0.0.1", base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


async def _load(urls: list[str], n: int, concurrency: int, deadline_s: float) -> tuple[int, int, float]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    sent, errors = 0, 0
    async with aiohttp.ClientSession(connector=connector) as http:
        async def worker(k: int) -> None:
            nonlocal sent, errors
            i = k
            while i < n and time.perf_counter() < deadline:
                async with http.post(urls[i % len(urls)], json=BODY) as resp:
                    await resp.read()
                    errors += resp.status != 200
                sent += 1
                i += concurrency

        for url in urls:  # open a connection to every instance before timing
            async with http.post(url, json=BODY) as resp:
                await resp.read()
        start = time.perf_counter()
        deadline = start + deadline_s
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        return sent, errors, time.perf_counter() - start


def _worker(args: argparse.Namespace) -> int:
    import uvloop

    urls = [f"http://127.0.0.1:{args.base_port + i}/v1/chat/completions" for i in range(INSTANCES)]
    sent, errors, seconds = uvloop.run(_load(urls, args.requests, args.concurrency, args.max_seconds))
    print(json.dumps({"sent": sent, "errors": errors, "seconds": seconds}))
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench sim")
    p.add_argument("--requests", type=int, default=30000, help="requests in all (default: %(default)s)")
    p.add_argument("--concurrency", type=int, default=64, help="in flight per load process")
    p.add_argument("--workers", type=int, default=1, help="load processes")
    p.add_argument("--max-seconds", type=float, default=60.0, help="stop sending after this long")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--base-port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args)

    base = _base_port(INSTANCES)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    fleet = Child("sim", [sys.executable, "-m", "app", "sim", "fleet", "--instances", str(INSTANCES),
                          "--base-port", str(base), "--zero-delay"], env, "fleet ready")
    try:
        assert fleet.wait_ready(60), "fleet did not start"
        per = args.requests // args.workers
        cmd = [sys.executable, "-m", "bench", "sim", "--worker", "--base-port", str(base), "--requests", str(per),
               "--concurrency", str(args.concurrency), "--max-seconds", str(args.max_seconds)]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env) for _ in range(args.workers)]
        outs = [json.loads(proc.communicate(timeout=args.max_seconds + 60)[0].strip().splitlines()[-1])
                for proc in procs]
    finally:
        fleet.stop()
    sent = sum(o["sent"] for o in outs)
    seconds = max(o["seconds"] for o in outs)
    print(json.dumps({"instances": INSTANCES, "rps": round(sent / seconds, 1), "requests": sent,
                      "errors": sum(o["errors"] for o in outs), "seconds": round(seconds, 3),
                      "load_processes": args.workers, "concurrency": args.concurrency}))
    return 0
