"""Semantic intents: routes from labelled example utterances, a fast path and a MiniLM path.

The router calls :meth:`IntentClassifier.classify`; the rest is for the CLI, the bench and tests.
"""

from router_core.intents.cache import CentroidCache, cache_path_for
from router_core.intents.classifier import IntentClassifier
from router_core.intents.cut import cut_to_tokens
from router_core.intents.routes import append_examples, load_routes, route_hash

__all__ = ["CentroidCache", "IntentClassifier", "append_examples", "cache_path_for", "cut_to_tokens",
           "load_routes", "route_hash"]
