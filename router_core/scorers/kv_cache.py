"""Free KV cache: ``1 - kv_cache_usage`` (the seed's ``mem`` term)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint

__all__ = ["KvCacheScorer"]


class KvCacheScorer(PluginBase):
    """Scores free KV cache.

    What it does: prefers instances with free KV cache. Inputs: staleness-adjusted KV usage
    (suspect data decays toward full). Parameters: none. Category: scorer, term ``mem``.
    """

    TYPE: ClassVar[str] = "kv-cache-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "mem"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """This scorer takes no parameters."""

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return ``1 - kv`` per candidate."""
        return [1.0 - c.eff.kv_cache_usage for c in pool]
