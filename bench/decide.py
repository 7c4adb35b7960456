"""``Router.decide`` plus building its trace (plugin durations observed), 64 candidates, beside LiteLLM.

Both choose among 64 deployments of one model with state already in memory: RouteLens's state view
has scraped gauges and evaluated its hysteresis latches; LiteLLM's router has its latency cache.
Prints p50/p99 of each and the p99 ratio (LiteLLM / RouteLens).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime

from prometheus_client import CollectorRegistry

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.state.parse import EngineGauges
from router_core.state.quality import QualityTable
from router_core.state.view import StateView
from schemas import Outcome, OutcomeStatus, RequestFeatures
from schemas.config import RouteLensConfig

N = 64


def _pct(xs: list[float], q: float) -> float:
    return statistics.quantiles(xs, n=100)[int(q) - 1]


def routelens_latencies(iterations: int, seed: int = 7) -> list[float]:
    """Milliseconds per decide() + finish() with realistic state (latches evaluated)."""
    rng = random.Random(seed)
    config = RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": f"i{i:02d}", "model": "m", "url": f"http://127.0.0.1:{20000 + i}"}
                                for i in range(N)]},
        "scoring": {"preset": "balanced"},
        "models": {"m": {"quality": {"chat": 0.8}}},
        "constraints": [
            {"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.8,
             "soft_threshold": 0.75},
            {"name": "queue", "metric": "queue", "threshold": 10, "enter_below": 6},
            {"name": "error-rate", "metric": "error_rate", "threshold": 0.15, "enter_below": 0.05},
        ],
    })
    now = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    view = StateView(config.fleet.instances, config.constraints, scrape=config.scrape, clock=time.monotonic,
                     wall=lambda: now)
    for spec in config.fleet.instances:
        view.update(spec.id, EngineGauges("vllm", rng.randint(0, 8), rng.randint(0, 8), rng.random() * 0.9, None))
        for _ in range(5):
            view.observe(spec.id, rng.uniform(50, 400), rng.random() > 0.02)
    view.tick()
    state = view.snapshot()
    router = build_router(config, metrics=CollectorRegistry())  # as the gateway runs it: plugin durations observed
    quality = QualityTable(config.models).snapshot()
    features = RequestFeatures(requested_model="m", n_messages=1, input_chars=120, est_input_tokens=30)
    outcome = Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0)
    out = []
    for i in range(iterations):
        rid = f"req-{i}"
        t0 = time.perf_counter()
        rec = TraceRecorder(request_id=rid, ts=now, router_version="bench", policy_hash=router.policy.hash,
                            query_hash="sha256:" + "0" * 64, features=features, intent="chat")
        ctx = DecisionContext(request_id=rid, features=features, intent="chat", now=now, quality=quality)
        rec.record_decision(router.decide(ctx, state))
        rec.finish(outcome)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def litellm_latencies(iterations: int) -> list[float]:
    """Milliseconds per LiteLLM ``async_get_available_deployment`` over 64 deployments."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price list
    from litellm.router import Router

    model_list = [{"model_name": "m", "litellm_params": {"model": "openai/m", "api_key": "x",
                                                         "api_base": f"http://127.0.0.1:{20000 + i}/v1"},
                   "model_info": {"id": f"d{i:02d}"}} for i in range(N)]
    router = Router(model_list=model_list, routing_strategy="latency-based-routing")
    # Give LiteLLM the same kind of state RouteLens has: a latency history for every deployment
    # (what its success callback records), so it compares rather than picking at random.
    rng = random.Random(7)
    history = {f"d{i:02d}": {"latency_normalized": [rng.uniform(0.001, 0.01) for _ in range(10)]} for i in range(N)}
    router.cache.set_cache(key="m_map", value=history, local_only=True)
    messages = [{"role": "user", "content": "classify: refund failed"}]

    async def run() -> list[float]:
        out = []
        for _ in range(iterations):
            t0 = time.perf_counter()
            await router.async_get_available_deployment(model="m", request_kwargs={}, messages=messages)
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    return asyncio.run(run())


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench decide")
    p.add_argument("--iterations", type=int, default=5000)
    p.add_argument("--no-litellm", action="store_true", help="skip the LiteLLM side")
    args = p.parse_args(argv)
    routelens_latencies(500)  # warm up
    ours = routelens_latencies(args.iterations)
    result: dict[str, object] = {
        "instances": N,
        "routelens_p50_ms": round(statistics.median(ours), 4),
        "routelens_p99_ms": round(_pct(ours, 99), 4),
    }
    if not args.no_litellm:
        litellm_latencies(200)
        theirs = litellm_latencies(min(args.iterations, 2000))
        result |= {
            "litellm_p50_ms": round(statistics.median(theirs), 4),
            "litellm_p99_ms": round(_pct(theirs, 99), 4),
            "ratio_p99": round(_pct(theirs, 99) / _pct(ours, 99), 2),
        }
    print(json.dumps(result))
    return 0
