"""Pickers report the real chance their sampling rule gave the chosen instance; the trace records it."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from router_core.decide.builtin import build_router
from router_core.decide.decision import DecisionContext
from router_core.decide.recorder import TraceRecorder
from router_core.pickers.power_of_two import PowerOfTwoPicker, win_probability
from router_core.pickers.softmax import SoftmaxPicker
from router_core.state.quality import QualityTable
from schemas import Attempt, AttemptStatus, Outcome, OutcomeStatus
from tests.router_core.conftest import NOW, decide, features, healthy, make_config
from tests.router_core.plugin_kit import build

SCORED = [("a", 0.9), ("b", 0.85), ("c", 0.5), ("d", 0.85), ("e", 0.1)]


def p2c() -> PowerOfTwoPicker:
    picker = build("p2c-picker")
    assert isinstance(picker, PowerOfTwoPicker)
    return picker


def softmax(t: float = 0.1) -> SoftmaxPicker:
    picker = build("softmax-picker", temperature=t)
    assert isinstance(picker, SoftmaxPicker)
    return picker


@pytest.mark.parametrize("n", [2, 3, 5, 64])
def test_p2c_win_probabilities_sum_to_one(n: int) -> None:
    assert math.isclose(math.fsum(win_probability(i, n) for i in range(n)), 1.0)
    assert win_probability(n - 1, n) == 0.0  # the worst is never the better of two


@pytest.mark.parametrize("picker", [p2c(), softmax(0.1), softmax(0.02)], ids=["p2c", "softmax-0.1", "softmax-0.02"])
def test_probabilities_sum_to_one_and_match_the_picks(picker: PowerOfTwoPicker | SoftmaxPicker) -> None:
    probs = picker.probabilities("r-0", SCORED)
    assert set(probs) == {iid for iid, _ in SCORED} and math.isclose(math.fsum(probs.values()), 1.0)
    n = 20_000
    seen: Counter[str] = Counter()
    for i in range(n):
        picked = picker.pick(f"r-{i}", SCORED)
        seen[picked.order[0]] += 1
        # the reported chance is the rule's chance for the instance it chose
        assert math.isclose(picked.probability, picker.probabilities(f"r-{i}", SCORED)[picked.order[0]])
    for iid, _ in SCORED:
        # p2c breaks the b/d tie per request id: compare the pair's joint frequency instead
        p = probs[iid] if not isinstance(picker, PowerOfTwoPicker) or iid not in "bd" else None
        if p is not None:
            assert abs(seen[iid] - n * p) <= 5 * math.sqrt(n * p * (1 - p)) + 1, (iid, seen[iid], n * p)
    if isinstance(picker, PowerOfTwoPicker):
        pair = win_probability(1, 5) + win_probability(2, 5)
        assert abs(seen["b"] + seen["d"] - n * pair) <= 5 * math.sqrt(n * pair * (1 - pair))


def test_max_score_is_certain() -> None:
    picker = build("max-score-picker")
    assert picker.pick("r", SCORED).probability == 1.0


@pytest.mark.parametrize("name", ["max", "p2c", "softmax"])
def test_the_trace_records_the_selection_probability(name: str) -> None:
    _, trace = decide(healthy(), make_config(router={"picker": name}))
    assert trace.selection_probability is not None and 0 < trace.selection_probability <= 1
    if name == "max":
        assert trace.selection_probability == 1.0


def test_a_single_candidate_is_certain_for_sampling_pickers() -> None:
    for picker in (p2c(), softmax()):
        assert picker.pick("r", [("a", 0.3)]).probability == 1.0


def test_a_retry_served_by_another_instance_has_no_propensity() -> None:
    cfg = make_config(router={"picker": "softmax"})
    router, f = build_router(cfg), features()
    ctx = DecisionContext(request_id="r1", features=f, intent="chat", now=NOW, quality=QualityTable({}).snapshot())
    decision = router.decide(ctx, healthy())
    first, second = decision.targets[0], decision.targets[1]

    def trace(attempts: list[Attempt]) -> float | None:
        rec = TraceRecorder(request_id="r1", ts=NOW, router_version="t", policy_hash=router.policy.hash,
                            query_hash="sha256:" + "0" * 64, features=f)
        rec.record_decision(decision)
        rec.record_attempts(attempts)
        return rec.finish(Outcome(status=OutcomeStatus.OK, http_status=200, total_ms=1.0)).selection_probability

    ok = Attempt(seq=0, instance=first.id, model=first.model, status=AttemptStatus.OK, http_status=200, latency_ms=1)
    assert decision.selection_probability is not None
    assert trace([ok]) == decision.selection_probability
    failed = ok.model_copy(update={"status": AttemptStatus.HTTP_ERROR, "http_status": 503})
    retried = Attempt(seq=1, instance=second.id, model=second.model, status=AttemptStatus.OK, http_status=200,
                      latency_ms=1)
    assert trace([failed, retried]) is None
