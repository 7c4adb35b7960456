"""Shared builders for router tests: a small fleet, snapshots, and one-call decisions."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.state.quality import QualityTable
from schemas import InstanceSnapshot, LatchState, Outcome, OutcomeStatus, RequestFeatures
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace

NOW = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)  # 15:00 UTC: no time-of-day profile applies

FLEET = [
    {"id": "big-a", "model": "big", "url": "http://127.0.0.1:1", "context_window": 32768, "cost": {"base": 1.8}},
    {"id": "big-b", "model": "big", "url": "http://127.0.0.1:2", "context_window": 32768, "cost": {"base": 1.8}},
    {"id": "small-a", "model": "small", "url": "http://127.0.0.1:3", "context_window": 8192, "cost": {"base": 1.0}},
]


def make_config(**overrides: Any) -> RouteLensConfig:
    base: dict[str, Any] = {"fleet": {"instances": FLEET}}
    base.update(overrides)
    return RouteLensConfig.model_validate(base)


def snap(iid: str, kv: float | None = 0.1, queue: float | None = 0, age: float | None = 0.5,
         latches: list[LatchState] | None = None, **kw: Any) -> InstanceSnapshot:
    model = next(i["model"] for i in FLEET if i["id"] == iid)
    return InstanceSnapshot(instance=iid, model=model, kv_cache_usage=kv, queue=queue,
                            scraped_at=None if age is None else NOW - timedelta(seconds=age),
                            latches=latches or [], **kw)


def healthy() -> dict[str, InstanceSnapshot]:
    return {"big-a": snap("big-a", kv=0.5), "big-b": snap("big-b", kv=0.2), "small-a": snap("small-a", kv=0.3, queue=4)}


def features(model: str = "auto", tokens: int = 100, max_tokens: int | None = None) -> RequestFeatures:
    return RequestFeatures(requested_model=model, n_messages=1, input_chars=tokens * 4, est_input_tokens=tokens,
                           max_tokens=max_tokens)


def decide(state: Mapping[str, InstanceSnapshot], config: RouteLensConfig | None = None,
           feats: RequestFeatures | None = None, request_id: str = "r1", intent: str | None = "chat",
           now: datetime = NOW, route: Any = None) -> tuple[list[str], DecisionTrace]:
    cfg = config or make_config()
    ticks = count()
    router = build_router(cfg, perf=lambda: next(ticks) * 1e-6)
    f = feats or features()
    rec = TraceRecorder(request_id=request_id, ts=now, router_version="t", policy_hash=router.policy.hash,
                        query_hash="sha256:" + "0" * 64, features=f, intent=intent)
    ctx = DecisionContext(request_id=request_id, features=f, intent=intent, now=now,
                          quality=QualityTable(cfg.models).snapshot(), route=route)
    decision = router.decide(ctx, state)
    rec.record_decision(decision)
    rec.record_policy(route)
    trace = rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0))
    return [s.id for s in decision.targets], trace
