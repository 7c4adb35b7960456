"""A synthetic experiment with a known effect, for the store, HTTP and CLI tests of ``compare``.

Arm ``a`` (router ``v2.3``) and arm ``b`` (``v2.4``) over one hour from ``T0``: b is 20% cheaper,
both error on every 20th request, latencies are lognormal with the same shape. Seeded, so every
backend sees the same rows.
"""

from __future__ import annotations

import random
from datetime import timedelta

from schemas import DecisionTrace, Feedback, Outcome, OutcomeStatus
from tests.factories import T0, make_trace

__all__ = ["END", "POLICY", "T0", "VERSION", "experiment", "forced"]

END = T0 + timedelta(hours=1)
VERSION = {"a": "v2.3", "b": "v2.4"}
POLICY = {"a": "sha256:aaaaaaaaaaaaaaaa", "b": "sha256:bbbbbbbbbbbbbbbb"}
COST = {"a": 2.0, "b": 1.6}  # b is 20% cheaper


def experiment(n_a: int, n_b: int, seed: int = 7) -> tuple[list[DecisionTrace], list[Feedback]]:
    """Return ``n_a`` traces of arm a and ``n_b`` of arm b, interleaved, and feedback on every third one."""
    rng = random.Random(seed)
    arms = ["a"] * n_a + ["b"] * n_b
    rng.shuffle(arms)
    seen = {"a": 0, "b": 0}
    traces, feedback = [], []
    step = timedelta(hours=1) / (len(arms) + 1)
    for i, arm in enumerate(arms):
        k = seen[arm]
        seen[arm] += 1
        error = k % 20 == 19  # the same error rate on both arms, exactly
        cost, total_ms = round(COST[arm] * rng.uniform(0.8, 1.2), 6), round(rng.lognormvariate(5.5, 0.6), 3)
        outcome = Outcome(status=OutcomeStatus.ERROR if error else OutcomeStatus.OK, http_status=502 if error else 200,
                          cost=cost, total_ms=total_ms)
        t = make_trace(f"req-{arm}-{k:06d}", ts=T0 + step * (i + 1), experiment_arm=arm, router_version=VERSION[arm],
                       policy_hash=POLICY[arm], outcome=outcome, selection_probability=0.5)
        traces.append(t)
        if i % 3 == 0:
            feedback.append(Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=1), correct=k % 5 != 0,
                                     expected_model="deepseek-v4-32k" if k % 4 else "qwen3-8b"))
    return traces, feedback


def forced(counts: dict[str, int]) -> tuple[list[DecisionTrace], list[Feedback]]:
    """Requests forced onto each arm by header (``arm_forced``), unlike the experiment's: every one an error at ten
    times the price and a second's latency, each with a misroute verdict. Counted in, they would move every figure."""
    traces, feedback = [], []
    for arm, n in counts.items():
        for k in range(n):
            outcome = Outcome(status=OutcomeStatus.ERROR, http_status=502, cost=COST[arm] * 10, total_ms=1000.0)
            t = make_trace(f"forced-{arm}-{k:04d}", ts=T0 + timedelta(minutes=1 + k), experiment_arm=arm,
                           arm_forced=True, router_version=VERSION[arm], policy_hash=POLICY[arm], outcome=outcome)
            traces.append(t)
            feedback.append(Feedback(request_id=t.request_id, ts=t.ts + timedelta(seconds=1), correct=False,
                                     expected_model="qwen3-8b"))
    return traces, feedback
