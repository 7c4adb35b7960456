import json
from collections.abc import Callable
from pathlib import Path

import pytest

from router_core.intents.fast import FastModel
from router_core.intents.routes import load_routes

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("tag", ["ha_en", "ha_zh"])
def test_accuracy_on_held_out_split_is_reported(tag: str, record_property: Callable[[str, object], None]) -> None:
    routes = load_routes(ROOT / f"data/intents/{tag}_train.yaml")
    model = FastModel(seed=0).fit([t for ts in routes.values() for t in ts],
                                  [r for r, ts in routes.items() for _ in ts])
    cases = [json.loads(line) for line in (ROOT / f"data/intents/{tag}_test.jsonl").read_text("utf-8").splitlines()]
    cases = [c for c in cases if c["expected"]]
    nearest, _ = model.score([c["text"] for c in cases])
    accuracy = sum(n == c["expected"] for n, c in zip(nearest, cases, strict=True)) / len(cases)
    record_property(f"{tag}_fast_top1_accuracy", accuracy)
    print(f"{tag} fast top-1 accuracy (no abstention): {accuracy:.3f}")
    assert accuracy > 0.5  # a floor against breakage; the figure itself is reported, not asserted


def test_confidences_are_probabilities() -> None:
    model = FastModel().fit(["pay my bill", "pay the bill now", "weather today", "is it raining"],
                            ["bill", "bill", "weather", "weather"])
    nearest, conf = model.score(["pay bill", "raining today?"])
    assert nearest == ["bill", "weather"]
    assert all(0.0 <= c <= 1.0 for c in conf)


def test_one_text_is_scored_exactly_as_scikit_learn_scores_it() -> None:
    from tests.router_core.intents.test_classifier import DEMO

    routes = load_routes(DEMO)
    texts = [t for ts in routes.values() for t in ts]
    labels = [r for r, ts in routes.items() for _ in ts]
    model = FastModel(0).fit(texts, labels)
    for query in ["Review the indemnification clause", "请帮我退款", "python bug in my regex", "", "zzzz"]:
        proba = model._clf.predict_proba(model._vec.transform([query]))[0]
        label, p = model.score_one(query)
        assert label == model.labels[int(proba.argmax())] and p == pytest.approx(float(proba.max()), abs=1e-5)
    two = FastModel(0).fit(["refund my order", "refund please", "fix my code", "code bug"],
                           ["ticket", "ticket", "code", "code"])
    proba = two._clf.predict_proba(two._vec.transform(["refund"]))[0]
    assert two.score_one("refund") == (two.labels[int(proba.argmax())], pytest.approx(float(proba.max()), abs=1e-5))
