"""Answer quality for this request's class: P(correct) per (model, class), refined by feedback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import Field

from router_core.framework import Candidate, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from router_core.state.quality import QualitySnapshot

__all__ = ["QualityScorer"]


class QualityScorer(PluginBase):
    """Scores expected answer quality for the request class.

    What it does: prefers the instance most likely to answer this kind of query well: its own
    learned estimate when its feedback has flagged it divergent from its siblings (so an
    instance that drifted loses traffic while its siblings keep theirs), else its model's.
    Inputs: the request's intent class and ``ctx.quality`` (prior from ``models.<m>.quality``,
    updated from ``POST /v1/feedback``; a :class:`~router_core.state.quality.QualitySnapshot` also
    carries the divergent instances' estimates). Unknown pairs score ``default``.
    Parameters: ``default``. Category: scorer, term ``quality``.
    """

    TYPE: ClassVar[str] = "quality-scorer"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "scorer"
    DEFAULT_NAME: ClassVar[str] = "quality"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        """Parameters of :class:`QualityScorer`."""

        default: float = Field(0.5, ge=0, le=1, description="The score of a (model, class) pair nobody rated.")

    params: Params

    def score(self, pool: Sequence[Candidate], ctx: RequestContext) -> list[float]:
        """Return the quality estimate of each candidate (its instance's, else its model's) for the class."""
        table, cls, default = ctx.quality, ctx.intent or "", self.params.default
        if isinstance(table, QualitySnapshot) and table.instances:
            return [table.estimate(c.spec.id, c.spec.model, cls, default) for c in pool]
        return [table.get((c.spec.model, cls), default) for c in pool]
