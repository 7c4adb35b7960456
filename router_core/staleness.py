"""Moved to :mod:`router_core.state.staleness`; kept while ``router_core/prepared.py`` imports it from here.

The ``decide/`` wing (issue 30, item 3) rewrites that import and deletes this module.
"""

from router_core.state.staleness import ENGINES_WITHOUT_KV, effective_state

__all__ = ["ENGINES_WITHOUT_KV", "effective_state"]
