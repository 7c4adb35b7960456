"""Moved to :mod:`router_core.state.quality`; kept while the router's own files import it from here.

``router_core/replay.py`` does: the ``decide/`` wing (issue 30, item 3) rewrites that import and
deletes this module.
"""

from router_core.state.quality import ALL, QualitySnapshot, QualityTable, diverges

__all__ = ["ALL", "QualitySnapshot", "QualityTable", "diverges"]
