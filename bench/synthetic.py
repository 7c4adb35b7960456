"""Deterministic, realistic decision traces for tests and benchmarks (seeded, no wall clock).

Traces look like the router's: ``n_candidates`` instances of a few models, each with the shared
:class:`InstanceSnapshot` of the current scrape round (a new round every ``round_every`` traces),
a hard-constraint violation on some, score terms on the feasible ones, the usual decision steps.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.fleet import InstanceSnapshot
from schemas.hashing import query_hash
from schemas.trace import DecisionTrace

__all__ = ["T0", "TraceFactory", "plain_of"]

T0 = datetime(2026, 11, 1, tzinfo=UTC)
_MODELS = ["deepseek-v4-32k", "deepseek-coder-6b-fp16", "qwen-72b"]
_RULES = ["auto", "code", "legal", "chat"]


class TraceFactory:
    """Builds traces from a seeded RNG.

    Args:
        seed: RNG seed; the same seed gives the same traces.
        n_candidates: Candidates per trace.
        start: Timestamp of the first trace.
        step: Time between two traces.
        round_every: Traces per scrape round (snapshots are shared within a round).
    """

    def __init__(self, seed: int = 7, *, n_candidates: int = 8, start: datetime = T0,
                 step: timedelta = timedelta(milliseconds=10), round_every: int = 100) -> None:
        self.rng = random.Random(seed)
        self.n = n_candidates
        self.start = start
        self.step = step
        self.round_every = round_every
        self._count = 0
        self._states: list[InstanceSnapshot] = []

    def _round(self, ts: datetime) -> None:
        r = self.rng
        self._states = [
            InstanceSnapshot(
                instance=f"inst-{k}", model=_MODELS[k % len(_MODELS)], scraped_at=ts, age_s=round(r.random(), 3),
                engine="vllm", queue=float(r.randint(0, 12)), running=float(r.randint(0, 8)),
                kv_cache_usage=round(r.random(), 3), warmup_progress=1.0, error_rate=round(r.random() / 20, 4),
            )
            for k in range(self.n)
        ]

    def trace(self, **overrides: Any) -> DecisionTrace:
        """Return the next trace; ``overrides`` replace top-level fields."""
        r = self.rng
        i = self._count
        self._count += 1
        ts = self.start + self.step * i
        if i % self.round_every == 0 or not self._states:
            self._round(ts)
        cands: list[dict[str, Any]] = []
        for k, state in enumerate(self._states):
            bad = (state.kv_cache_usage or 0) > 0.85
            cands.append({
                "instance": state.instance, "model": state.model, "zone": f"az{k % 2 + 1}", "feasible": not bad,
                "violations": [{"constraint": "kv-cache", "metric": "kv_cache_usage", "op": "<=",
                                "value": state.kv_cache_usage, "threshold": 0.85,
                                "reason": f"kv_cache_usage {state.kv_cache_usage} breaks <= 0.85"}] if bad else [],
                "state": state, "total": None if bad else round(r.random(), 4),
            })
        ranked = sorted((c for c in cands if c["feasible"]), key=lambda c: -float(c["total"] or 0.0))
        for rank, c in enumerate(ranked, 1):
            c["rank"] = rank
        chosen = ranked[0] if ranked else cands[0]
        fallback = not ranked
        status = "ok" if r.random() > 0.03 else "error"
        data: dict[str, Any] = {
            "request_id": f"req_{self.rng.getrandbits(80):020x}", "ts": ts, "router_version": "routelens-0.1.0",
            "policy_hash": "sha256:0123456789abcdef", "experiment_arm": r.choice(["a", "b"]),
            "query_hash": query_hash(f"q{r.randint(0, 5000)}"),
            "features": {"requested_model": "auto", "n_messages": 1, "input_chars": 120, "est_input_tokens": 40},
            "rule": r.choice(_RULES), "candidates": cands,
            "decision_trace": [
                {"seq": 0, "step": "analyse", "kind": "analyse", "value": 40.0, "reason": "1 messages"},
                {"seq": 1, "step": "policy", "kind": "policy", "reason": "rule auto"},
                {"seq": 2, "step": "filter/kv-cache", "kind": "filter",
                 "instances": [c["instance"] for c in ranked], "rejected": [c["instance"] for c in cands
                                                                            if not c["feasible"]]},
                {"seq": 3, "step": "score", "kind": "score", "value": chosen.get("total")},
                {"seq": 4, "step": "pick", "kind": "pick", "value": chosen.get("total"),
                 "instances": [chosen["instance"]]},
            ],
            "selected_model": chosen["model"], "selected_instance": chosen["instance"],
            "fallback_triggered": fallback, "fallback_reason": "no feasible instance" if fallback else None,
            "mode": "fail_open" if fallback else "normal",
            "attempts": [{"seq": 0, "instance": chosen["instance"], "model": chosen["model"],
                          "status": "ok" if status == "ok" else "http_error",
                          "http_status": 200 if status == "ok" else 503, "latency_ms": round(r.uniform(20, 900), 2)}],
            "latency_ms": round(r.uniform(0.05, 0.5), 3),
            "outcome": {"status": status, "http_status": 200 if status == "ok" else 502,
                        "prompt_tokens": 40, "completion_tokens": r.randint(5, 400),
                        "cost": 1.8 if status == "ok" else None, "total_ms": round(r.uniform(20, 1500), 2)},
        }
        data.update(overrides)
        return DecisionTrace.model_validate(data)

    def traces(self, n: int) -> Iterator[DecisionTrace]:
        """Yield the next ``n`` traces."""
        for _ in range(n):
            yield self.trace()


def plain_of(trace: DecisionTrace) -> dict[str, Any]:
    """``trace`` as the plain values a gateway's recorder hands to storage (``TraceRecorder.plain``).

    Every field in order; the nested candidates, steps and weights as dicts, the rest as they are.
    """
    values = dict(trace.__dict__)
    for key in ("candidates", "decision_trace", "score_weights"):
        values[key] = [dict(item.__dict__) for item in values[key]]
    return values
