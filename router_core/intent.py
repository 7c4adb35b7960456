"""Moved to :mod:`router_core.intents.rules`; kept while ``router_core/analysis.py`` imports it from here.

The ``decide/`` wing (issue 30, item 3) rewrites that import and deletes this module.
"""

from router_core.intents.rules import CLASSES, Intent, classify_intent

__all__ = ["CLASSES", "Intent", "classify_intent"]
