"""Traces the router itself decided, for replay tests and ``bench replay`` (seeded, no wall clock).

A replayed trace must carry what ``decide`` read: every candidate's state at decision time, the
request features and intent. :class:`RouterTraceFactory` runs the real :class:`router_core.decide.router.Router`
over a fleet of ``n_instances`` instances of three models whose state changes every
``round_every`` requests (one scrape round), so under the same policy a replay flips nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from router_core.decide.builtin import builtin_registry
from router_core.decide.decision import DecisionContext
from router_core.decide.policy import build_policy
from router_core.decide.recorder import TraceRecorder
from router_core.decide.router import Router
from router_core.state.quality import QualityTable
from schemas.config import RouteLensConfig
from schemas.fleet import InstanceSnapshot
from schemas.hashing import query_hash
from schemas.trace import Attempt, DecisionTrace, Outcome, RequestFeatures

__all__ = ["CONSTRAINTS", "MODELS", "T0", "RouterTraceFactory", "fleet_config"]

T0 = datetime(2026, 11, 1, tzinfo=UTC)
MODELS = ["deepseek-v4-32k", "deepseek-coder-6b-fp16", "qwen-72b"]
_INTENTS = ["code", "chat", "contract", "ticket", "math"]
CONSTRAINTS: list[dict[str, Any]] = [
    {"name": "kv-cache", "metric": "kv_cache_usage", "threshold": 0.85, "enter_below": 0.8, "soft_threshold": 0.75},
    {"name": "queue", "metric": "queue", "threshold": 10, "enter_below": 6},
    {"name": "error-rate", "metric": "error_rate", "threshold": 0.15, "enter_below": 0.05},
]
_COST = {"deepseek-v4-32k": 1.8, "deepseek-coder-6b-fp16": 1.0, "qwen-72b": 2.5}


def fleet_config(n_instances: int = 8, *, preset: str = "balanced", drop_model: str | None = None,
                 **sections: Any) -> RouteLensConfig:
    """The bench fleet: ``n_instances`` instances round-robin over :data:`MODELS` (``drop_model`` left out)."""
    instances = [{"id": f"inst-{k}", "model": MODELS[k % len(MODELS)], "url": f"http://127.0.0.1:{19000 + k}",
                  "zone": f"az{k % 2 + 1}", "cost": {"base": _COST[MODELS[k % len(MODELS)]]}}
                 for k in range(n_instances) if MODELS[k % len(MODELS)] != drop_model]
    data: dict[str, Any] = {
        "fleet": {"instances": instances},
        "scoring": {"preset": preset},
        "models": {
            "deepseek-v4-32k": {"quality": {"code": 0.8, "chat": 0.85, "contract": 0.95, "ticket": 0.85, "math": 0.88},
                                "latency_ms": 900, "max_concurrency": 8},
            "deepseek-coder-6b-fp16": {"quality": {"code": 0.92, "chat": 0.75, "contract": 0.6, "ticket": 0.88,
                                                   "math": 0.7}, "latency_ms": 250, "max_concurrency": 16},
            "qwen-72b": {"quality": {"code": 0.85, "chat": 0.9, "contract": 0.9, "ticket": 0.8, "math": 0.92},
                         "latency_ms": 1200, "max_concurrency": 8},
        },
        "constraints": CONSTRAINTS,
    }
    data.update(sections)
    return RouteLensConfig.model_validate(data)


class RouterTraceFactory:
    """Decides seeded requests with the real router and returns their traces.

    Args:
        config: The policy that decides (default :func:`fleet_config`).
        seed: RNG seed; the same seed gives the same traces.
        start: Timestamp of the first trace.
        step: Time between two traces.
        round_every: Requests per scrape round (snapshots are shared within a round).
        explicit_share: Share of requests naming a model instead of ``auto``.
    """

    def __init__(self, config: RouteLensConfig | None = None, seed: int = 7, *, start: datetime = T0,
                 step: timedelta = timedelta(milliseconds=10), round_every: int = 64,
                 explicit_share: float = 0.2) -> None:
        self.config = config or fleet_config()
        self.policy = build_policy(self.config, builtin_registry())
        self.router = Router(self.policy)
        self.quality = dict(QualityTable(self.policy.models).snapshot())
        self.rng = random.Random(seed)
        self.start, self.step, self.round_every, self.explicit_share = start, step, round_every, explicit_share
        self._count = 0
        self._state: dict[str, InstanceSnapshot] = {}

    def _round(self, ts: datetime) -> None:
        r = self.rng
        self._state = {
            spec.id: InstanceSnapshot(
                instance=spec.id, model=spec.model, scraped_at=ts - timedelta(milliseconds=r.randint(0, 400)),
                engine="vllm", queue=float(r.randint(0, 12)), running=float(r.randint(0, 10)),
                kv_cache_usage=round(r.random() * 0.95, 3), warmup_progress=1.0,
                error_rate=round(r.random() / 12, 4), p50_latency_ms=round(r.uniform(150, 1300), 1),
                p95_latency_ms=round(r.uniform(1300, 2500), 1), window_requests=r.randint(0, 40),
            )
            for spec in self.policy.fleet
        }

    def trace(self) -> DecisionTrace:
        """Return the next request's trace."""
        r, i = self.rng, self._count
        self._count += 1
        ts = self.start + self.step * i
        if i % self.round_every == 0 or not self._state:
            self._round(ts)
        model = r.choice(MODELS) if r.random() < self.explicit_share else "auto"
        chars = r.randint(20, 6000)
        features = RequestFeatures(requested_model=model, n_messages=r.randint(1, 6), input_chars=chars,
                                   est_input_tokens=chars // 4, max_tokens=r.choice([None, 256, 1024]),
                                   analysed_chars=chars)
        intent = r.choice(_INTENTS)
        rid = f"req_{r.getrandbits(80):020x}"
        rec = TraceRecorder(request_id=rid, ts=ts, router_version="routelens-0.1.0", policy_hash=self.policy.hash,
                            query_hash=query_hash(f"q{r.randint(0, 5000)}"), features=features, intent=intent,
                            intent_confidence=round(r.uniform(0.5, 1.0), 3))
        ctx = DecisionContext(request_id=rid, features=features, intent=intent, now=ts, quality=self.quality)
        decision = self.router.decide(ctx, self._state)
        rec.record_decision(decision)
        ok = r.random() > 0.03
        chosen = decision.selected
        if chosen is not None:
            rec.record_attempts([Attempt(seq=0, instance=chosen.id, model=chosen.model,
                                         status="ok" if ok else "http_error", http_status=200 if ok else 503,
                                         latency_ms=round(r.uniform(20, 900), 2))])
        total = round(r.uniform(20, 1500), 2)
        outcome = Outcome(status="ok" if ok and chosen else "error", http_status=200 if ok and chosen else 502,
                          prompt_tokens=features.est_input_tokens, completion_tokens=r.randint(5, 400),
                          cost=chosen.cost.base if ok and chosen else None, total_ms=total)
        trace = rec.finish(outcome)
        return trace.model_copy(update={"experiment_arm": r.choice(["a", "b"])})

    def traces(self, n: int) -> Iterator[DecisionTrace]:
        """Yield the next ``n`` traces."""
        for _ in range(n):
            yield self.trace()
