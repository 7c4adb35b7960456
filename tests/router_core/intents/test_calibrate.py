from router_core.intents.calibrate import calibrated_threshold, fold_indices
from router_core.intents.fast import fit_fast

TEXTS = [f"please pay my {w} bill" for w in "water gas phone power rent card".split()] * 3 + \
        [f"what is the weather in {c}" for c in "paris rome oslo lima kyiv pune".split()] * 3
LABELS = ["bill"] * 18 + ["weather"] * 18


def test_folds_are_stratified_and_seeded() -> None:
    a = fold_indices(LABELS, 3, seed=1)
    assert a == fold_indices(LABELS, 3, seed=1)
    assert a != fold_indices(LABELS, 3, seed=2)
    for f in range(3):
        assert sum(1 for x, lab in zip(a, LABELS, strict=True) if x == f and lab == "bill") == 6


def test_threshold_is_deterministic_with_a_seed() -> None:
    t1 = calibrated_threshold(TEXTS, LABELS, fit_fast(0), folds=3, seed=7)
    t2 = calibrated_threshold(TEXTS, LABELS, fit_fast(0), folds=3, seed=7)
    assert t1 == t2 and 0.0 < t1 <= 1.0


def test_accept_threshold_is_the_lowest_confidence_keeping_the_precision_above_the_floor() -> None:
    from router_core.intents.calibrate import accept_threshold

    conf = [0.9, 0.8, 0.7, 0.6, 0.5]
    right = [True, True, True, False, False]
    assert accept_threshold(right, conf, precision=1.0, floor=0.0) == 0.7
    assert accept_threshold(right, conf, precision=0.75, floor=0.0) == 0.6
    assert accept_threshold(right, conf, precision=1.0, floor=0.75) == 0.8
    assert accept_threshold([False] * 5, conf, precision=0.9, floor=0.0) == 1.0


def test_abstain_threshold_spends_the_budget_on_the_guard_first() -> None:
    from router_core.intents.calibrate import abstain_threshold

    conf = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert abstain_threshold(conf, [False] * 5, budget=2) == 0.3  # 0.1 and 0.2 abstain
    assert abstain_threshold(conf, [True, False, False, False, False], budget=2) == 0.3  # guard + 0.2
    assert abstain_threshold(conf, [False, False, False, True, True], budget=2) == 0.1  # spent: no other abstains
    assert abstain_threshold(conf, [False, False, True, True, True], budget=2) == 0.0  # overspent
    assert abstain_threshold(conf, [False] * 5, budget=0) == 0.1


def test_left_out_fits_without_each_route_and_samples_at_most_most() -> None:
    from router_core.intents.calibrate import left_out

    labels = ["a", "a", "b", "c", "c", "d"]
    seen: list[tuple[list[int], list[int]]] = []

    def without(keep: list[int], out: list[int]) -> list[float]:
        seen.append((keep, out))
        return [float(i) for i in out]

    assert left_out(labels, without) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert seen[0] == ([2, 3, 4, 5], [0, 1])  # route a left out: fitted on the rest, scored on a's examples
    seen.clear()
    assert len(left_out(labels, without, most=2, seed=3)) in (2, 3, 4) and len(seen) == 2
    assert left_out(["a", "b", "a"], without) == []  # two routes: a model of one says nothing
