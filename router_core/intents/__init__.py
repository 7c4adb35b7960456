"""Intents: which class of traffic a query belongs to, by rules and by meaning.

::

    rules.py        classify_intent: weighted zh/en patterns per class (the seed's rule-enhanced routing)
    routes.py       routes from labelled example utterances (load, hash, append)
    classifier.py   IntentClassifier: the semantic classifier the router calls (fast path, embedding path)
    fast.py         the fast path: character n-gram TF-IDF + logistic regression
    joint.py        the embedding path: MiniLM and the n-grams in one logistic regression
    early.py        the early exit: a query the encoder's first layers already settle skips the rest
    background.py   small talk and gibberish: what no route set is about (abstention guards)
    calibrate.py    thresholds from held-out folds of the routes' examples
    set_calibration.py  SetCalibration: the classifier's calibration of one route set, and its guards
    baseline.py     the seed's nearest K-means centroid, which `intents eval --method centroids` measures
    minilm.py  embedding.py  cache.py  cut.py  _pooled.py   the model, centroids, cache, input bound

The router calls :func:`classify_intent` on every request and :meth:`IntentClassifier.classify`
when semantic intents are configured; the rest is for the CLI, the bench and tests. The rule table
loads with the package; the semantic classifier and its numpy and scikit-learn on first use of a
name from it (PEP 562).
"""

from typing import TYPE_CHECKING

from router_core.intents.rules import CLASSES, Intent, classify_intent
from router_core.lazy import lazy_getattr

if TYPE_CHECKING:
    from router_core.intents.cache import CentroidCache, cache_path_for
    from router_core.intents.classifier import IntentClassifier
    from router_core.intents.cut import cut_to_tokens
    from router_core.intents.routes import append_examples, load_routes, route_hash

# public name loaded on first use -> its module
_LAZY: dict[str, str] = {
    "CentroidCache": "router_core.intents.cache",
    "IntentClassifier": "router_core.intents.classifier",
    "append_examples": "router_core.intents.routes",
    "cache_path_for": "router_core.intents.cache",
    "cut_to_tokens": "router_core.intents.cut",
    "load_routes": "router_core.intents.routes",
    "route_hash": "router_core.intents.routes",
}

__all__ = ["CLASSES", "CentroidCache", "Intent", "IntentClassifier", "append_examples", "cache_path_for",
           "classify_intent", "cut_to_tokens", "load_routes", "route_hash"]


__getattr__ = lazy_getattr(__name__, _LAZY, globals())
