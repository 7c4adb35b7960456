"""What a shadow decision adds to the request path: the gateway's own decide-and-trace path, with and without it.

Two in-process gateways over the same 64-instance fleet and state (scraped gauges, latches
evaluated) serve the same requests, interleaved one by one so that both see the same machine:
one runs an experiment without a shadow, the other the same experiment with a shadow policy
deciding every request. The request path is timed from the arm assignment to the point where
the gateway hands the response over (``Gateway._arm``, ``Router.decide``, ``Gateway._finish``, as
``chat_completions`` runs them; forwarding is left out, it is the same either way). The shadow
itself runs after that, as the gateway runs it (a loop callback once the response is on its way);
its cost is reported apart (``shadow_decide_p99_ms``): it is CPU the loop spends between requests.
A shadowed request's trace is built with its shadow, after the response, so that path also sheds
the trace's validation: ``added_p99_ms`` can be below zero. ``shadow_on_path_p99_ms`` is what the
shadow itself puts on the path (the sampling hash and capturing the job), whatever the noise.

``measure(requests)`` returns the figures as a dict (``bench.replay`` may call it); ``main`` prints
them as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.gateway import Gateway
from router_core.state.parse import EngineGauges
from schemas import DecisionTrace, RequestFeatures, ShadowDecision
from schemas.config import RouteLensConfig

__all__ = ["main", "measure"]

N = 64
NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


class _Hooks:
    """Keeps what the gateway emits of its shadow decisions (storage is not what is measured here)."""

    def __init__(self) -> None:
        self.shadows: list[ShadowDecision | None] = []

    def emit(self, trace: DecisionTrace) -> bool:
        self.shadows.append(trace.shadow)  # the traces themselves are dropped, as a sink would take them
        return True

    def lookup(self, request_id: str) -> DecisionTrace | None:
        return None

    def record_feedback(self, feedback: Any) -> None:
        pass

    def has_stored_verdict(self, request_id: str) -> bool:
        return False

    async def lookup_elsewhere(self, request_id: str) -> Any:
        return None

    def record_snapshots(self, snapshots: list[Any]) -> None:
        pass

    takes_plain = False  # validated traces: the shadow is read off the model

    def emit_plain(self, values: dict[str, Any]) -> bool:
        return False  # never called (takes_plain is False)

    def record_policy(self, record: Any) -> None:
        pass

    def record_event(self, event: Any) -> None:
        pass

    def storage_state(self) -> dict[str, Any] | None:
        return None

    def health(self) -> str | None:
        return None


def _config(shadow: bool) -> RouteLensConfig:
    experiments: dict[str, Any] = {"key": "header:x-user-id", "arms": [
        {"name": "balanced", "router_version": "v1", "share": 0.5},
        {"name": "seed", "router_version": "v1-seed", "share": 0.5,
         "policy": {"scoring": {"preset": "seed-instance-score"}}}]}
    if shadow:
        experiments["shadow"] = {"router_version": "v2-rc", "sample": 1.0, "policy": {"scoring": {
            "preset": "balanced", "weights": {"quality": 0.3, "latency": 0.2, "cost": 0.4, "balance": 0.1}}}}
    return RouteLensConfig.model_validate({
        "fleet": {"instances": [{"id": f"i{i:02d}", "model": "m", "url": f"http://127.0.0.1:{20000 + i}"}
                                for i in range(N)]},
        "scoring": {"preset": "balanced"},
        "models": {"m": {"quality": {"chat": 0.8}}},
        "experiments": experiments,
    })


def _gateway(shadow: bool, seed: int) -> tuple[Gateway, _Hooks]:
    config, hooks, rng = _config(shadow), _Hooks(), random.Random(seed)
    gw = Gateway(config, build_router(config), hooks, wall=lambda: NOW)
    for spec in config.fleet.instances:  # the same state for both gateways (same seed)
        gw.view.update(spec.id, EngineGauges("vllm", rng.randint(0, 8), rng.randint(0, 8), rng.random() * 0.9, None))
        for _ in range(5):
            gw.view.observe(spec.id, rng.uniform(50, 400), rng.random() > 0.02)
    gw.view.tick()
    return gw, hooks


def _path_ms(gw: Gateway, i: int, features: RequestFeatures, on_path: list[float]) -> float:
    """One request's decide-and-trace path through the gateway's own steps, in milliseconds.

    The shadow's own work on the path (sampling, capturing the job) is appended to ``on_path``.
    """
    rid = f"req-{i}"
    request = cast(Any, SimpleNamespace(headers={"x-user-id": f"user-{i % 997}"}))
    t0 = time.perf_counter()
    lane = gw.chat.lane(rid, request.headers, {})
    router = lane.router
    rec = TraceRecorder(request_id=rid, ts=NOW, router_version=lane.version,
                        policy_hash=gw.book.hash_of(lane.router.policy, lane.arm),
                        query_hash="sha256:" + "0" * 64, features=features, intent="chat", experiment_arm=lane.arm)
    ctx = DecisionContext(request_id=rid, features=features, intent="chat", now=NOW, quality=gw.quality.snapshot())
    state = gw.inflight.adjust(gw.view.snapshot())
    decision = router.decide(ctx, state)
    rec.record_decision(decision)
    if gw.experiment is not None and (shadow := gw.experiment.shadow) is not None:
        t1 = time.perf_counter()
        rec.defer_shadow(shadow.job(ctx, state, decision))  # as the gateway's decide stage does
        on_path.append((time.perf_counter() - t1) * 1e3)
    gw.chat.finish(rec, t0, 200)
    return (time.perf_counter() - t0) * 1e3


def _pct(xs: list[float], q: int) -> float:
    return statistics.quantiles(xs, n=100)[q - 1]


def measure(requests: int = 5000, seed: int = 7) -> dict[str, Any]:
    """Serve ``requests`` through each gateway, interleaved; return p50/p99 of both paths and the shadow's cost."""
    on_path: list[float] = []

    async def run() -> tuple[list[float], list[float], _Hooks]:
        off, _ = _gateway(False, seed)
        on, on_hooks = _gateway(True, seed)
        features = RequestFeatures(requested_model="m", n_messages=1, input_chars=120, est_input_tokens=30)
        for i in range(min(500, requests)):  # warm up both
            _path_ms(off, i, features, []), _path_ms(on, i, features, [])
            await asyncio.sleep(0)
        on_hooks.shadows.clear()
        without, with_ = [], []
        for i in range(requests):
            if i % 2:  # alternate which goes first, so neither always follows the other's shadow
                without.append(_path_ms(off, i, features, on_path))
                with_.append(_path_ms(on, i, features, on_path))
            else:
                with_.append(_path_ms(on, i, features, on_path))
                without.append(_path_ms(off, i, features, on_path))
            await asyncio.sleep(0)  # the shadow runs here, after its request's path, as in the gateway
        await asyncio.sleep(0)
        return without, with_, on_hooks

    without, with_, hooks = asyncio.run(run())
    shadow_ms = [s.latency_ms for s in hooks.shadows if s is not None]
    flipped = sum(1 for s in hooks.shadows if s is not None and s.flipped)
    p99_without, p99_with = _pct(without, 99), _pct(with_, 99)
    return {
        "requests": requests,
        "instances": N,
        "p50_ms_without_shadow": round(statistics.median(without), 4),
        "p50_ms_with_shadow": round(statistics.median(with_), 4),
        "p99_ms_without_shadow": round(p99_without, 4),
        "p99_ms_with_shadow": round(p99_with, 4),
        "added_p99_ms": round(p99_with - p99_without, 4),
        "shadow_on_path_p99_ms": round(_pct(on_path, 99), 4),
        "shadow_decisions": len(shadow_ms),
        "shadow_flip_rate": round(flipped / len(shadow_ms), 4) if shadow_ms else None,
        "shadow_decide_p50_ms": round(statistics.median(shadow_ms), 4) if shadow_ms else None,
        "shadow_decide_p99_ms": round(_pct(shadow_ms, 99), 4) if len(shadow_ms) > 1 else None,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench shadow")
    p.add_argument("--requests", type=int, default=5000)
    args = p.parse_args(argv)
    print(json.dumps(measure(args.requests)))
    return 0
