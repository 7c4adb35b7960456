"""Collects a request's decision as plain data; :meth:`finish` validates it into one ``DecisionTrace``.

Steps and candidates are kept as dicts while the request runs and validated once at the end (one
pass in pydantic-core instead of hundreds of small model constructions on the hot path).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schemas.common import RoutingMode, StepKind
from schemas.trace import Attempt, DecisionTrace, Outcome, RequestFeatures

__all__ = ["TraceRecorder"]


class TraceRecorder:
    """Append-only record of one request; :meth:`finish` is the only place a trace is built."""

    def __init__(self, *, request_id: str, ts: datetime, router_version: str, policy_hash: str, query_hash: str,
                 features: RequestFeatures, intent: str | None = None, intent_confidence: float | None = None) -> None:
        self.request_id = request_id
        self.ts = ts
        self.features = features
        self.intent = intent
        self._head: dict[str, Any] = {
            "request_id": request_id, "ts": ts, "router_version": router_version, "policy_hash": policy_hash,
            "query_hash": query_hash, "features": features, "intent": intent, "intent_confidence": intent_confidence,
        }
        self.steps: list[dict[str, Any]] = []
        self.attempts: list[Attempt] = []
        self.candidates: list[dict[str, Any]] = []
        self.score_weights: list[dict[str, Any]] = []
        self.rule: str | None = None
        self.mode = RoutingMode.NORMAL
        self.fallback_reason: str | None = None
        self.selected: tuple[str, str] | None = None  # (model, instance)
        self.decision_ms = 0.0

    def step(self, step: str, kind: StepKind, *, value: float | None = None, reason: str = "",
             plugin: str | None = None, instances: list[str] | None = None, rejected: list[str] | None = None,
             duration_us: float | None = None) -> None:
        """Append one step; its ``seq`` is its position."""
        self.steps.append({
            "seq": len(self.steps), "step": step, "kind": kind, "value": value, "reason": reason, "plugin": plugin,
            "instances": instances or [], "rejected": rejected or [], "duration_us": duration_us,
        })

    def fallback(self, reason: str, mode: RoutingMode | None = None) -> None:
        """Mark the decision as a fallback; the first reason is kept, later ones become steps."""
        if self.fallback_reason is None:
            self.fallback_reason = reason
        if mode is not None:
            self.mode = mode

    def finish(self, outcome: Outcome) -> DecisionTrace:
        """Validate and return the trace; called exactly once per request, success or failure."""
        model, instance = self.selected or (None, None)
        return DecisionTrace.model_validate({
            **self._head, "rule": self.rule, "score_weights": self.score_weights, "candidates": self.candidates,
            "decision_trace": self.steps, "selected_model": model, "selected_instance": instance,
            "fallback_triggered": self.fallback_reason is not None, "fallback_reason": self.fallback_reason,
            "attempts": self.attempts, "mode": self.mode, "latency_ms": self.decision_ms, "outcome": outcome,
        })
