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


# The app's sample: what an operator opens when a request fell back.
SAMPLE_REQUEST_ID = "req-7f3a9c"
SELECTED_MODEL = "llama-3.1-8b"
SELECTED_INSTANCE = "vllm-llama-b"
TOP_RANKED = "vllm-qwen-a"
REJECTED_INSTANCE = "vllm-qwen-c"
KV_REASON = "KV cache above 90% for 12 s (hysteresis latched)"
FALLBACK_REASON = "vllm-qwen-a timed out after 3000 ms; next in chain"

_TS = datetime(2025, 11, 29, 12, 0, 0, tzinfo=UTC)


WEIGHTS = [
    ScoreWeight(name="queue-depth", weight=0.3, scorer="queue/queue-depth-scorer"),
    ScoreWeight(name="kv-cache", weight=0.4, scorer="mem/kv-cache-scorer"),
    ScoreWeight(name="latency", weight=0.3, scorer="latency/latency-scorer"),
]


def _terms(queue: float, kv: float, latency: float) -> list[float]:
    return [queue, kv, latency]  # aligned with WEIGHTS


def _state(instance: str, model: str, *, queue: float, running: float, kv: float) -> InstanceSnapshot:
    return InstanceSnapshot(
        instance=instance,
        model=model,
        scraped_at=_TS,
        age_s=1.2,
        engine="vllm",
        queue=queue,
        running=running,
        kv_cache_usage=kv,
        warmup_progress=1.0,
        error_rate=0.0,
    )


def _candidates() -> list[CandidateEval]:
    violation = Violation(
        constraint="kv-cache",
        metric="kv_cache_usage",
        op=">",
        value=0.97,
        threshold=0.9,
        reason=KV_REASON,
        since=_TS,
    )
    # Deliberately out of order: the tables and tree must sort rank 1, rank 2, then rejected.
    return [
        CandidateEval(
            instance=REJECTED_INSTANCE,
            model="qwen2.5-7b",
            zone="local-a",
            feasible=False,
            violations=[violation],
            state=_state(REJECTED_INSTANCE, "qwen2.5-7b", queue=14, running=8, kv=0.97),
        ),
        CandidateEval(
            instance=SELECTED_INSTANCE,
            model=SELECTED_MODEL,
            zone="local-b",
            feasible=True,
            state=_state(SELECTED_INSTANCE, SELECTED_MODEL, queue=5, running=6, kv=0.3),
            score_terms=_terms(0.5, 0.7, 0.6),
            total=0.61,
            rank=2,
        ),
        CandidateEval(
            instance=TOP_RANKED,
            model="qwen2.5-7b",
            zone="local-a",
            feasible=True,
            state=_state(TOP_RANKED, "qwen2.5-7b", queue=1, running=3, kv=0.42),
            score_terms=_terms(0.9, 0.58, 0.8),
            total=0.742,
            rank=1,
        ),
    ]


def _steps() -> list[DecisionStep]:
    everyone = [TOP_RANKED, SELECTED_INSTANCE, REJECTED_INSTANCE]
    feasible = [TOP_RANKED, SELECTED_INSTANCE]
    spec: list[tuple[str, StepKind, float | None, str, list[str], list[str]]] = [
        ("analyse", StepKind.ANALYSE, 460, "est. 460 input tokens, en", [], []),
        ("policy", StepKind.POLICY, None, "rule code-default matched", everyone, []),
        ("filter/kv-cache", StepKind.FILTER, 0.9, "kv_cache_usage > 0.9", feasible, [REJECTED_INSTANCE]),
        ("score/queue-depth", StepKind.SCORE, 0.3, "weight 0.3", feasible, []),
        ("score/kv-cache", StepKind.SCORE, 0.4, "weight 0.4", feasible, []),
        ("score/latency", StepKind.SCORE, 0.3, "weight 0.3", feasible, []),
        ("pick", StepKind.PICK, 0.742, "max score, margin 0.132", [TOP_RANKED], []),
        ("attempt", StepKind.ATTEMPT, 3000, "timeout", [TOP_RANKED], []),
        ("fallback", StepKind.FALLBACK, None, FALLBACK_REASON, [SELECTED_INSTANCE], [TOP_RANKED]),
        ("attempt", StepKind.ATTEMPT, 812, "ok", [SELECTED_INSTANCE], []),
    ]
    return [
        DecisionStep(seq=i, step=s, kind=k, value=v, reason=r, instances=kept, rejected=rej, duration_us=40.0)
        for i, (s, k, v, r, kept, rej) in enumerate(spec)
    ]


def make_fallback_trace(request_id: str = SAMPLE_REQUEST_ID) -> DecisionTrace:
    """A realistic trace: 3 candidates (one rejected by kv-cache), a timeout then a fallback that worked."""
    return DecisionTrace(
        request_id=request_id,
        ts=_TS,
        router_version="0.1.0",
        policy_hash="sha256:5d41402abc4b2a76",
        experiment_arm="B",
        query_hash="sha256:" + "ab" * 32,
        features=RequestFeatures(
            requested_model="auto",
            n_messages=3,
            input_chars=1840,
            est_input_tokens=460,
            max_tokens=512,
            language=Language.EN,
            analysed_chars=1840,
        ),
        rule="code-default",
        intent="code",
        intent_confidence=0.82,
        score_weights=WEIGHTS,
        candidates=_candidates(),
        decision_trace=_steps(),
        selected_model=SELECTED_MODEL,
        selected_instance=SELECTED_INSTANCE,
        fallback_triggered=True,
        fallback_reason=FALLBACK_REASON,
        attempts=[
            Attempt(
                seq=0,
                instance=TOP_RANKED,
                model="qwen2.5-7b",
                status=AttemptStatus.TIMEOUT,
                error_class="ReadTimeout",
                latency_ms=3000,
            ),
            Attempt(
                seq=1,
                instance=SELECTED_INSTANCE,
                model=SELECTED_MODEL,
                status=AttemptStatus.OK,
                http_status=200,
                latency_ms=812,
            ),
        ],
        latency_ms=1.84,
        outcome=Outcome(
            status=OutcomeStatus.OK,
            http_status=200,
            prompt_tokens=460,
            completion_tokens=212,
            cost=0.00042,
            ttft_ms=95,
            total_ms=3890,
        ),
    )
