"""Deterministic builders of contract objects for tests (no wall clock, no randomness)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from schemas import (
    Attempt,
    AttemptStatus,
    CandidateEval,
    DecisionStep,
    DecisionTrace,
    InstanceSnapshot,
    Language,
    Outcome,
    OutcomeStatus,
    RequestFeatures,
    ScoreWeight,
    StepKind,
    Violation,
    query_hash,
)

T0 = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)


def make_trace(request_id: str = "req_test_0001", **overrides: Any) -> DecisionTrace:
    """A two-candidate trace: one rejected on KV cache, one selected."""
    hot = InstanceSnapshot(instance="v4-a", model="deepseek-v4-32k", scraped_at=T0, age_s=0.4,
                           kv_cache_usage=0.93, queue=3)
    cool = InstanceSnapshot(instance="v4-b", model="deepseek-v4-32k", scraped_at=T0, age_s=0.3,
                            kv_cache_usage=0.2, queue=1)
    fields: dict[str, Any] = {
        "request_id": request_id,
        "ts": T0,
        "router_version": "routelens-test",
        "policy_hash": "sha256:0123456789abcdef",
        "query_hash": query_hash("合同第3条的违约责任是什么？"),
        "features": RequestFeatures(
            requested_model="auto", n_messages=1, input_chars=14, est_input_tokens=14, language=Language.ZH
        ),
        "rule": "auto",
        "score_weights": [ScoreWeight(name="mem", weight=0.4, scorer="mem/kv-cache-scorer")],
        "candidates": [
            CandidateEval(
                instance="v4-a", model="deepseek-v4-32k", zone="az1", feasible=False, state=hot,
                violations=[Violation(constraint="kv-cache", metric="kv_cache_usage", op="<=", value=0.93,
                                      threshold=0.85, reason="kv_cache_usage 0.93 breaks <= 0.85")],
            ),
            CandidateEval(
                instance="v4-b", model="deepseek-v4-32k", zone="az2", feasible=True, state=cool,
                score_terms=[0.8], total=0.32, rank=1,
            ),
        ],
        "decision_trace": [
            DecisionStep(seq=0, step="analyse", kind=StepKind.ANALYSE, value=14.0, reason="1 messages"),
            DecisionStep(seq=1, step="filter/kv-cache", kind=StepKind.FILTER, instances=["v4-b"], rejected=["v4-a"]),
            DecisionStep(seq=2, step="pick", kind=StepKind.PICK, value=0.32, instances=["v4-b"]),
        ],
        "selected_model": "deepseek-v4-32k",
        "selected_instance": "v4-b",
        "attempts": [Attempt(seq=0, instance="v4-b", model="deepseek-v4-32k", status=AttemptStatus.OK,
                             http_status=200, latency_ms=41.5)],
        "latency_ms": 0.12,
        "outcome": Outcome(status=OutcomeStatus.OK, http_status=200, prompt_tokens=14, completion_tokens=20,
                           cost=1.8, total_ms=43.0),
    }
    fields.update(overrides)
    return DecisionTrace(**fields)
