from pathlib import Path

import numpy as np

from router_core.intents.cache import CentroidCache, cache_path_for
from router_core.intents.classifier import IntentClassifier
from router_core.intents.minilm import MODEL_NAME as MODEL_ID
from router_core.intents.routes import append_examples
from schemas.config.intents import IntentSettings
from tests.router_core.intents._fakes import FakeEmbedder

ROUTES = ("bill:\n" + "".join(f"  - pay my {w} bill\n" for w in "water gas phone power rent".split())
          + "weather:\n" + "".join(f"  - weather in {c} today\n" for c in "paris rome oslo lima kyiv".split())
          + "music:\n" + "".join(f"  - play some {g} music\n" for g in "jazz rock pop folk soul".split()))


def _fit(path: Path) -> tuple[IntentClassifier, FakeEmbedder]:
    emb = FakeEmbedder()
    clf = IntentClassifier.from_settings(IntentSettings(routes=path.name, folds=3), path.parent, embedder=emb)
    clf.fit_embedding()
    return clf, emb


def test_add_reclusters_only_that_route(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(ROUTES)
    clf, _ = _fit(path)
    assert clf.reclustered == ["bill", "weather", "music"]
    before = CentroidCache.load(cache_path_for(path), MODEL_ID)
    assert set(before.routes) == {"bill", "weather", "music"}

    append_examples(path, "weather", ["is it raining in bern"])
    clf, emb = _fit(path)
    assert clf.reclustered == ["weather"]
    assert emb.embedded[:6] == [f"weather in {c} today" for c in "paris rome oslo lima kyiv".split()] + [
        "is it raining in bern"]
    after = CentroidCache.load(cache_path_for(path), MODEL_ID)
    for route in ("bill", "music"):
        assert after.routes[route].hash == before.routes[route].hash
        assert np.array_equal(after.routes[route].centroids, before.routes[route].centroids)
        assert np.array_equal(after.routes[route].embeddings, before.routes[route].embeddings)
    assert after.routes["weather"].hash != before.routes["weather"].hash


def test_unchanged_routes_reuse_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(ROUTES)
    _fit(path)
    clf, emb = _fit(path)
    route_texts = {t for line in ROUTES.splitlines() if line.startswith("  - ") for t in [line[4:]]}
    assert clf.reclustered == [] and not route_texts & set(emb.embedded)  # only the background is embedded anew


def test_another_precision_never_reuses_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(ROUTES)
    _fit(path)  # the fake has no model_id: cached as the fp32 model
    emb = FakeEmbedder()
    emb.model_id = f"{MODEL_ID}/int8"  # type: ignore[attr-defined]
    clf = IntentClassifier.from_settings(IntentSettings(routes=path.name, folds=3), tmp_path, embedder=emb)
    clf.fit_embedding()
    assert clf.model_id == f"{MODEL_ID}/int8" and clf.reclustered == ["bill", "weather", "music"]
    assert CentroidCache.load(cache_path_for(path), f"{MODEL_ID}/int8").routes.keys() == {"bill", "weather", "music"}


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "x.npz"
    p.write_bytes(b"not a zip")
    assert CentroidCache.load(p, MODEL_ID).routes == {}
