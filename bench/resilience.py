"""Breakers under load: a crashed and a hung instance out of four at 200 requests/s, and the breaker check's cost.

Real processes on loopback: ``python -m app sim fleet`` (four zero-delay instances) and ``python -m
app serve`` (one worker, breakers on: 3 consecutive timeouts or connect errors, or a stall of 0.5 s
with an attempt outstanding and no answer (the sim answers in ms; the in-flight counter moves
traffic away from a hung instance after its first outstanding attempt, so more never accumulate),
open 2 s, 3 trial passes to close). The load comes from an asyncio aiohttp client in a process of
its own (open loop: one request every 5 ms whatever the answers).
Each case warms up 3 s, then injects the fault (``POST /admin/faults``) on the instance that served
most of the warm-up, for 6 s, and runs 5 s more; the gateway's ``/metrics`` is polled every 50 ms.

Per case: ``last_routed_after_s`` (fault start to the last attempt the gateway counted on the
faulty instance, its half-open trials apart, while the fault lasted; an attempt is counted when its
request ends, so this is an upper bound), ``trial_attempts`` and ``last_trial_after_s`` (the
half-open trials the breaker let through during the fault), ``client_failures`` (non-2xx answers
and client errors during the case),
``failed_attempts`` (failed attempts counted during the case), ``recovered_after_s`` (fault end to
the breaker closed again), ``requests``. ``decide_overhead_p99_ms``: p99 of the breaker filter's
check over the 16 candidates of one decision (in process), and decide() p99 with and without it.

Last line: ``{"crash": {...}, "hang": {...}, "decide_overhead_p99_ms": ..., "decide_p99_ms": {...},
"redis_p99_ms": null}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from app.run.procs import Child, free_ports, wait_http
from bench.openloop import open_loop
from bench.redis_bench import redis_bench

RPS = 200
BODY = {"model": "auto", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}
_ATTEMPT = re.compile(r'^routelens_gateway_attempts_total\{instance="([^"]+)",status="([^"]+)"\} (\S+)$', re.M)
_STATE = re.compile(r'^routelens_breaker_state\{name="([^"]+)",scope="instance"\} (\S+)$', re.M)


def _load(url: str, seconds: float, out: str) -> None:
    """Open-loop load (RPS per second) for ``seconds``; writes [(sent_at, status)] as JSON to ``out``."""
    import aiohttp

    async def run() -> list[tuple[float, int]]:
        results: list[tuple[float, int]] = []
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000),
                                         timeout=aiohttp.ClientTimeout(total=30)) as session:
            async def one(at: float) -> None:
                try:
                    async with session.post(url, json=BODY) as resp:
                        await resp.read()
                        results.append((at, resp.status))
                except (aiohttp.ClientError, TimeoutError):
                    results.append((at, 0))

            await open_loop(RPS, lambda: one(time.time()), count=int(seconds * RPS))
        return results

    Path(out).write_text(json.dumps(asyncio.run(run())))


def _metrics(gateway: str) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    for _ in range(3):
        try:
            text = urllib.request.urlopen(f"{gateway}/metrics", timeout=10).read().decode()
            break
        except OSError:
            continue
    else:
        raise RuntimeError(f"{gateway}/metrics did not answer")
    attempts = {(i, s): float(v) for i, s, v in _ATTEMPT.findall(text)}
    return attempts, {n: float(v) for n, v in _STATE.findall(text)}


def _post(url: str, body: dict[str, Any] | None = None, method: str = "POST") -> None:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=5).read()


def fault_case(kind: str, gateway: str, urls: dict[str, str], tmp: Path,
               warm_s: float = 3.0, fault_s: float = 6.0, after_s: float = 5.0) -> dict[str, Any]:
    """Run one fault case against the running fleet and gateway; return its figures."""
    out = tmp / f"load-{kind}.json"
    before, _ = _metrics(gateway)
    load = mp.get_context("spawn").Process(target=_load, args=(f"{gateway}/v1/chat/completions",
                                                               warm_s + fault_s + after_s, str(out)))
    load.start()
    time.sleep(warm_s)
    warm, _ = _metrics(gateway)
    served = {i: warm.get((i, "ok"), 0) - before.get((i, "ok"), 0) for i in urls}
    target = max(served, key=lambda i: served[i])
    _post(f"{urls[target]}/admin/faults", {"kind": kind, "duration_s": fault_s})
    fault_at = time.monotonic()
    last_count = sum(v for (i, _), v in warm.items() if i == target)
    last_seen, recovered, opened, trials, last_trial = 0.0, None, None, 0, None
    while load.is_alive():
        time.sleep(0.05)
        now = time.monotonic() - fault_at
        attempts, states = _metrics(gateway)
        count = sum(v for (i, _), v in attempts.items() if i == target)
        state = states.get(target, 0.0)
        if count > last_count and now <= fault_s:
            if opened is None or state == 0.0:
                last_seen = now
            else:  # half-open trials (the breaker let them through on purpose)
                trials, last_trial = trials + int(count - last_count), now
            last_count = count
        if opened is None and state == 2.0:
            opened = now
        if opened is not None and recovered is None and now > fault_s and state == 0.0:
            recovered = now - fault_s
    load.join()
    end, _ = _metrics(gateway)
    results = json.loads(out.read_text())
    failed = sum(v - before.get(k, 0) for k, v in end.items() if k[1] != "ok")
    return {"instance": target, "requests": len(results), "last_routed_after_s": round(last_seen, 3),
            "opened_after_s": None if opened is None else round(opened, 3),
            "trial_attempts": trials, "last_trial_after_s": None if last_trial is None else round(last_trial, 3),
            "client_failures": sum(1 for _, s in results if not 200 <= s < 300),
            "failed_attempts": int(failed), "recovered_after_s": None if recovered is None else round(recovered, 3)}


def decide_overhead(iterations: int = 20000) -> dict[str, float]:
    """p99 (ms) of the breaker filter over one decision's candidates, and decide() p99 with and without it.

    "with" has the breaker filter and every breaker closed, "without" has no breaker filter (the
    like-for-like pair), "with_open" has one of the 16 instances' breakers open, so its decisions
    also reject it and record why. The three routers' decisions are interleaved one by one.
    """
    from router_core.decide.builtin import build_router
    from router_core.decide.decision import DecisionContext
    from router_core.decide.plugin_specs import specs_from_sections
    from router_core.filters.breaker import BreakerFilter
    from router_core.resilience.breakers import BreakerBoard
    from router_core.state.view import StateView
    from schemas import RequestFeatures
    from schemas.config import RouteLensConfig

    base = {"fleet": {"instances": [{"id": f"i{i:02d}", "model": "m", "url": f"http://127.0.0.1:{20000 + i}"}
                                    for i in range(16)]}}
    specs = [s for s in specs_from_sections(RouteLensConfig.model_validate(base))
             if not s.type.endswith("-scorer") or s.weight is not None]  # explicit pipelines: weighted scorers only
    config = RouteLensConfig.model_validate({**base, "router": {"plugins": [s.model_dump() for s in specs]}})
    bare = RouteLensConfig.model_validate({**base, "router": {"plugins": [
        s.model_dump() for s in specs if s.type != "breaker-filter"]}})
    now = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=time.monotonic,
                     wall=lambda: now)
    view.tick()
    state = view.snapshot()
    board = BreakerBoard(config.resilience.breakers, config.fleet.instances, clock=time.monotonic)
    board._open(board.get("instance", "i03"), "bench", time.monotonic())  # type: ignore[arg-type]
    features = RequestFeatures(requested_model="m", n_messages=1, input_chars=120, est_input_tokens=30)
    out: dict[str, list[float]] = {"with": [], "without": [], "with_open": []}
    routers = {"with": build_router(config), "without": build_router(bare), "with_open": build_router(config)}
    closed = BreakerBoard(config.resilience.breakers, config.fleet.instances, clock=time.monotonic)
    boards = {"with": closed, "without": None, "with_open": board}  # asked per decision, as the gateway does
    flts = [f for f in routers["with_open"].policy.filters if isinstance(f, BreakerFilter)]
    labels = ("with", "without", "with_open")
    fleet = config.fleet.instances
    for i in range(3 * iterations):  # interleaved, so drift and collections fall on all alike
        label = labels[i % 3]
        t0 = time.perf_counter()
        on = boards[label]
        ctx = DecisionContext(request_id=f"r{i // 3}", features=features, intent=None, now=now, quality={},
                              blocked=None if on is None else on.blocked(fleet))
        routers[label].decide(ctx, state)
        out[label].append((time.perf_counter() - t0) * 1e3)
    if flts:
        flt = flts[0]
        from router_core.framework import Candidate
        from router_core.state.staleness import effective_state
        cands = [Candidate(s, state[s.id], effective_state(state[s.id], now, config.scrape, 10.0))
                 for s in config.fleet.instances]
        ctx = DecisionContext(request_id="r", features=features, intent=None, now=now, quality={},
                              blocked=board.blocked(fleet))
        checks = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            for c in cands:
                flt.check(c, ctx)
            checks.append((time.perf_counter() - t0) * 1e3)
        out["filter"] = checks

    def p99(xs: list[float]) -> float:
        return round(statistics.quantiles(xs, n=100)[98], 4)

    return {"filter_p99_ms": p99(out["filter"]), "decide_with_p99_ms": p99(out["with"]),
            "decide_without_p99_ms": p99(out["without"]), "decide_with_open_p99_ms": p99(out["with_open"]),
            "decide_added_p50_ms": round(statistics.median(out["with"]) - statistics.median(out["without"]), 4)}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench resilience")
    p.add_argument("--cases", default="crash,hang", help="fault kinds to run, comma-separated")
    args = p.parse_args(argv)
    from sim.behaviour import builtin_config

    tmp = Path(tempfile.mkdtemp(prefix="routelens-bench-res-"))
    *ports, gw = free_ports(5)
    sim = builtin_config(4, 0, zero_delay=True)
    instances = [s.model_copy(update={"url": f"http://127.0.0.1:{port}", "model": "m", "zone": "local"})
                 for s, port in zip(sim.fleet.instances, ports, strict=True)]
    cfg = sim.model_dump(mode="json")
    cfg["sim"]["models"] = {"m": next(iter(cfg["sim"]["models"].values()))}
    cfg.update({
        "fleet": {"instances": [s.model_dump(mode="json") for s in instances]},
        "gateway": {"host": "127.0.0.1", "port": gw, "max_attempts": 3, "upstream_timeout_s": 5.0},
        "storage": {"duckdb_path": str(tmp / "traces.duckdb")},
        "scrape": {"interval_s": 0.5, "timeout_s": 0.5, "stale_after_s": 3},
        "constraints": [{"name": "queue", "metric": "queue", "op": "<=", "threshold": 1e9}],
        "probes": {"enabled": False},
        "resilience": {"breakers": {"instance": {"consecutive_failures": 3, "stall_after_s": 0.5,
                                                 "stall_min_outstanding": 1, "open_s": 2, "close_after": 3}}},
    })
    (tmp / "c.yaml").write_text(yaml.safe_dump(cfg))
    py = [sys.executable, "-m", "app", "--config", str(tmp / "c.yaml")]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    gateway = f"http://127.0.0.1:{gw}"
    urls = {s.id: s.url for s in instances}
    children: list[Child] = []
    result: dict[str, Any] = {"rps": RPS, "instances": len(instances)}
    try:
        fleet = Child("sim", [*py, "sim", "fleet"], env, "fleet ready")
        children.append(fleet)
        assert fleet.wait_ready(60), "the simulated fleet did not start"
        serve = Child("gateway", [*py, "serve", "--workers", "1"], env, "gateway ready")
        children.append(serve)
        assert serve.wait_ready(60) and wait_http(f"{gateway}/health", 10, serve.alive), "the gateway did not start"
        for kind in args.cases.split(","):
            result[kind] = fault_case(kind, gateway, urls, tmp)
            time.sleep(3)  # the faulty instance recovers and its breaker closes before the next case
    finally:
        for child in reversed(children):
            child.stop()
    overhead = decide_overhead()
    result["decide_overhead_p99_ms"] = overhead["filter_p99_ms"]
    result["decide_p99_ms"] = overhead
    if shutil.which("redis-server"):  # what the shared state costs a request with Redis (bench.redis_bench)
        redis = redis_bench()
        result["redis_p99_ms"], result["redis"] = redis["redis_p99_ms"], redis
    else:
        result["redis_p99_ms"] = None
    print(json.dumps(result))
    return 0
