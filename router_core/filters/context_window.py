"""The request must fit the model's context window."""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.trace import Violation

__all__ = ["ContextWindowFilter"]


class ContextWindowFilter(PluginBase):
    """Rejects instances whose context window is smaller than prompt plus requested output.

    What it does: estimated input tokens + ``max_tokens`` (0 when absent) must fit.
    Inputs consumed: ``RequestFeatures.est_input_tokens``, ``max_tokens``; ``InstanceSpec.context_window``.
    Parameters: none.
    Category: filter.
    """

    TYPE: ClassVar[str] = "context-window-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "context-window"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        """:class:`ContextWindowFilter` takes no parameters."""

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a violation when the request does not fit."""
        need = ctx.features.est_input_tokens + (ctx.features.max_tokens or 0)
        window = candidate.spec.context_window
        if need <= window:
            return None
        return Violation(constraint=self.name, metric="tokens", op="<=", value=float(need),
                         threshold=float(window), reason=f"needs ~{need} tokens, window is {window}")
