"""QualityTable: feedback per model and per instance; one bad instance is flagged and does not poison its model."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson
import pytest

from router_core.state.quality import ALL, QualitySnapshot, QualityTable, diverges
from schemas.config import ModelProfile
from tests.router_core.gateway.gateway_kit import CHAT, gateway_client
from tests.router_core.gateway.test_forwarding import reply

PRIORS = {"v4": ModelProfile(quality={"ticket": 0.88})}
FLEET = ["v4-0", "v4-1", "v4-2", "v4-3"]


def feed(table: QualityTable, p_correct: dict[str, float], rounds: int, seed: int = 7) -> None:
    """Round-robin verdicts over the instances of ``v4``, each right with its own probability."""
    rng = random.Random(seed)
    for _ in range(rounds):
        for inst, p in p_correct.items():
            table.update("v4", "ticket", rng.random() < p, instance=inst)


def test_one_drifting_instance_is_flagged_and_does_not_poison_its_model() -> None:
    table = QualityTable(PRIORS)
    feed(table, {"v4-0": 0.0, "v4-1": 0.88, "v4-2": 0.88, "v4-3": 0.88}, rounds=50)
    snap = table.snapshot()
    assert snap.divergent == {("v4-0", "ticket"), ("v4-0", ALL)} and snap.is_divergent("v4-0", "ticket")
    assert snap[("v4", "ticket")] > 0.8 and table.get("v4", "ticket") == snap[("v4", "ticket")]
    assert snap.estimate("v4-0", "v4", "ticket", 0.5) < 0.2
    assert all(snap.estimate(i, "v4", "ticket", 0.5) == snap[("v4", "ticket")] for i in FLEET[1:])  # as the model
    assert list(snap) == [("v4", "ticket")] and dict(snap.items()) == dict(snap.models)  # the Mapping: models only


def test_a_whole_model_regressing_is_learned_as_the_models_quality() -> None:
    table = QualityTable(PRIORS)
    feed(table, dict.fromkeys(FLEET, 0.2), rounds=50)
    snap = table.snapshot()
    assert not snap.divergent and snap[("v4", "ticket")] < 0.3  # no sibling is better: nothing to single out


def test_a_new_or_rarely_fed_instance_scores_like_its_model() -> None:
    table = QualityTable(PRIORS)
    feed(table, dict.fromkeys(FLEET[:3], 0.88), rounds=30)
    table.update("v4", "ticket", False, instance="v4-3")
    table.update("v4", "ticket", False, instance="v4-3")
    snap = table.snapshot()
    model = snap[("v4", "ticket")]
    assert snap.estimate("v4-new", "v4", "ticket", 0.5) == model  # no feedback: the model's estimate
    assert not snap.divergent and snap.estimate("v4-3", "v4", "ticket", 0.5) == model  # two verdicts are not evidence
    assert snap.estimate("x", "unknown", "ticket", 0.3) == 0.3


def test_verdicts_without_an_instance_count_for_the_model_as_before() -> None:
    table = QualityTable({"big": ModelProfile(quality={"math": 0.9})}, prior_strength=10)
    for _ in range(10):
        table.update("big", "math", correct=False)
    assert table.get("big", "math") == pytest.approx(9 / 20) and not table.snapshot().instances


def test_healthy_siblings_score_alike_whatever_their_luck() -> None:
    table = QualityTable(PRIORS)
    for n in range(30):  # v4-1 unlucky (80%), v4-2 lucky (100%): not significantly apart
        table.update("v4", "ticket", n % 5 != 0, instance="v4-1")
        table.update("v4", "ticket", True, instance="v4-2")
    snap = table.snapshot()
    assert not snap.divergent and not snap.instances  # a max picker is not herded onto the luckiest
    assert snap.estimate("v4-1", "v4", "ticket", 0.5) == snap.estimate("v4-2", "v4", "ticket", 0.5)


def test_a_drift_over_all_classes_is_found_before_any_one_class_has_enough_verdicts() -> None:
    classes = ["ticket", "code", "chat", "math", "contract"]
    table = QualityTable({"v4": ModelProfile(quality=dict.fromkeys(classes, 0.88))})
    for n in range(15):
        cls = classes[n % 5]  # three verdicts per class each
        table.update("v4", cls, False, instance="v4-0")
        for inst in ("v4-1", "v4-2"):
            table.update("v4", cls, n % 10 != 0, instance=inst)
    snap = table.snapshot()
    assert snap.divergent == {("v4-0", ALL)}
    assert all(snap.estimate("v4-0", "v4", c, 0.5) < 0.3 for c in classes)  # every class, even unseen ones
    assert snap.estimate("v4-0", "v4", "unseen", 0.5) == snap.estimate("v4-1", "v4", "unseen", 0.5) == 0.5


def test_the_flag_clears_when_the_instance_answers_well_again() -> None:
    table = QualityTable(PRIORS)
    feed(table, {"v4-0": 0.0, "v4-1": 0.9, "v4-2": 0.9}, rounds=15)
    assert table.snapshot().is_divergent("v4-0", "ticket")
    for _ in range(60):
        table.update("v4", "ticket", True, instance="v4-0")
    assert not table.snapshot().divergent


def test_the_snapshot_is_precomputed_and_a_held_one_never_changes() -> None:
    table = QualityTable(PRIORS)
    held = table.snapshot()
    assert table.snapshot() is held  # nothing is built per request
    feed(table, {"v4-0": 0.0, "v4-1": 0.9}, rounds=20)
    assert held[("v4", "ticket")] == pytest.approx(0.88) and not held.instances and not held.divergent
    assert table.snapshot() is table.snapshot() is not held


def test_classes_are_judged_apart() -> None:
    table = QualityTable({"v4": ModelProfile(quality={"ticket": 0.88, "code": 0.8})})
    feed(table, {"v4-0": 0.0, "v4-1": 0.9, "v4-2": 0.9}, rounds=20)
    for _ in range(20):
        for inst in ("v4-0", "v4-1", "v4-2"):
            table.update("v4", "code", True, instance=inst)
    snap = table.snapshot()  # 50% right overall against 95%: flagged as a whole too, but code stays good
    assert snap.divergent == {("v4-0", "ticket"), ("v4-0", ALL)}
    assert snap.estimate("v4-0", "v4", "code", 0.5) > 0.8 > 0.2 > snap.estimate("v4-0", "v4", "ticket", 0.5)
    assert snap[("v4", "code")] > 0.9 and snap[("v4", "ticket")] > 0.8
    rows = {(r["instance"], r["class"]): r for r in table.instance_rows()}
    assert rows[("v4-0", "ticket")]["divergent"] is True and rows[("v4-0", "ticket")]["verdicts"] == 20
    assert rows[("v4-1", "code")]["divergent"] is False and rows[("v4-1", "code")]["model"] == "v4"


@pytest.mark.parametrize(("bad", "rest", "expected"), [
    ((0, 10), (26, 4), True),  # all wrong against 87%: flagged at the minimum evidence
    ((0, 9), (26, 4), False),  # one verdict short of min_verdicts
    ((0, 30), (5, 4), False),  # the siblings have too little evidence to compare with
    ((80, 20), (850, 150), False),  # 80% against 85%: worse, but within the margin
    ((40, 60), (850, 150), True),
    ((9, 1), (0, 10), False),  # better than its siblings: never flagged
])
def test_diverges(bad: tuple[float, float], rest: tuple[float, float], expected: bool) -> None:
    assert diverges(bad, rest) is expected


def test_snapshot_is_a_read_only_mapping_of_model_estimates() -> None:
    snap = QualitySnapshot({("m", "c"): 0.7}, {("i", "c"): 0.1}, frozenset({("i", "c")}))
    assert snap.get(("m", "c")) == 0.7 and snap.get(("i", "c")) is None and len(snap) == 1
    assert snap.estimate("i", "m", "c", 0.5) == 0.1 and snap.estimate("j", "m", "c", 0.5) == 0.7


def test_feedback_is_learned_for_the_instance_that_answered() -> None:
    async def main() -> dict[str, Any]:
        async with gateway_client({"a": reply(200), "b": reply(200)}) as (client, hooks):
            resp = await client.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "fb-i"})
            assert resp.status == 200
            answered = hooks.traces[resp.headers["x-request-id"]].selected_instance
            fb = await client.post("/v1/feedback", json={"request_id": "fb-i", "correct": False,
                                                         "expected_class": "chat"})
            assert fb.status == 202
            body: dict[str, Any] = orjson.loads(await fb.read())
            assert body["learned"]["instance"] == answered == resp.headers["x-routelens-instance"]
            return body

    body = asyncio.run(main())
    assert body["status"] == "accepted" and body["learned"]["model"] == "m" and body["learned"]["class"] == "chat"
    assert body["learned"]["p_instance"] == body["learned"]["p_model"] and body["learned"]["divergent"] is False


def test_forgetting_an_instance_lets_it_score_as_its_model_again() -> None:
    table = QualityTable(PRIORS)
    feed(table, {"v4-0": 0.0, "v4-1": 0.9, "v4-2": 0.9}, rounds=20)
    before = table.snapshot()
    assert before.is_divergent("v4-0", "ticket") and table.forget("v4-0") and not table.forget("v4-0")
    after = table.snapshot()
    assert not after.divergent and not after.instances and after[("v4", "ticket")] == before[("v4", "ticket")]
    assert all(r["instance"] != "v4-0" for r in table.instance_rows())


def test_two_drifting_instances_of_four_are_both_flagged() -> None:
    table = QualityTable(PRIORS)
    feed(table, {"v4-0": 0.0, "v4-1": 0.0, "v4-2": 0.9, "v4-3": 0.9}, rounds=40)
    snap = table.snapshot()
    assert {i for i, c in snap.divergent if c == ALL} == {"v4-0", "v4-1"} and snap[("v4", "ticket")] > 0.8


def test_the_model_estimate_is_the_prior_plus_the_unflagged_verdicts_after_any_sequence() -> None:
    classes = ["ticket", "code", "chat"]
    table = QualityTable({"v4": ModelProfile(quality=dict.fromkeys(classes, 0.8))}, prior_strength=20)
    rng, log = random.Random(3), []
    p = {"v4-0": 0.1, "v4-1": 0.9, "v4-2": 0.85, "v4-3": 0.9}
    for _ in range(600):  # v4-0 drifts from the start; instances and classes in a random order
        inst, cls = rng.choice(FLEET), rng.choice(classes)
        ok, known = rng.random() < p[inst], rng.random() < 0.95  # a few verdicts do not say which instance
        table.update("v4", cls, ok, instance=inst if known else None)
        log.append((inst if known else "", cls, ok))
    snap = table.snapshot()
    assert snap.is_divergent("v4-0", "ticket") and not any(snap.is_divergent(i, "ticket") for i in FLEET[1:])
    for cls in classes:  # recomputed from scratch: the incremental totals agree
        kept = [ok for inst, c, ok in log if c == cls and not snap.is_divergent(inst, cls)]
        assert snap[("v4", cls)] == pytest.approx((16 + sum(kept)) / (20 + len(kept)))


def _verdicts(table: QualityTable, model: str, cls: str, instance: str, right: int, wrong: int) -> None:
    for k in range(right + wrong):
        table.update(model, cls, k < right, instance=instance)


@pytest.mark.parametrize(("classes", "flagged"), [(["math"], True), (["math", "code", "chat", "ticket", "contract",
                                                                        "summary"], False)])
def test_class_tests_share_one_error_rate_over_the_models_classes(classes: list[str], flagged: bool) -> None:
    # 6 of 13 right against siblings' 60 of 66 on math: beyond the margin at z 2.33 (one test), not at
    # Bonferroni's 2.94 for six classes, where chance alone would otherwise flag a healthy instance in one of them.
    assert diverges((6, 7), (60, 6)) and not diverges((6, 7), (60, 6), z=2.94)
    table = QualityTable({"m": ModelProfile(quality=dict.fromkeys(classes, 0.88))})
    for inst in ("m-a", "m-c"):
        _verdicts(table, "m", "math", inst, 30, 3)
    _verdicts(table, "m", "math", "m-b", 6, 7)
    for cls in classes[1:]:  # healthy elsewhere: the test over all classes does not flag m-b
        for inst in ("m-a", "m-b", "m-c"):
            _verdicts(table, "m", cls, inst, 20, 0)
    assert table.snapshot().is_divergent("m-b", "math") is flagged
    assert not table.snapshot().is_divergent("m-a", "math")
