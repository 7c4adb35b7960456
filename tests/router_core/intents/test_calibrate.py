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
