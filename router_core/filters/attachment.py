"""The model must accept every type of the request's attachments."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.config.attachments import normalise_type
from schemas.trace import Violation

__all__ = ["AttachmentFilter"]


class AttachmentFilter(PluginBase):
    """Rejects instances whose model does not accept a type among the request's attachments.

    What it does: each of ``RequestFeatures.file_types`` (typed by the bytes, see
    :mod:`router_core.decide.attachments`) must be in ``accept[model]``; a model ``accept`` leaves out
    accepts every type, and a request without attachments passes everywhere.
    Inputs consumed: ``RequestFeatures.file_types``; ``InstanceSpec.model``.
    Parameters: ``accept`` (model -> types; derived from ``routing.attachments.accept``).
    Category: filter.
    """

    TYPE: ClassVar[str] = "attachment-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "attachment"
    STATE_ONLY: ClassVar[bool] = False

    class Params(PluginParams):
        """Parameters of :class:`AttachmentFilter`."""

        accept: dict[str, list[str]] = Field(
            default={}, description="Model -> attachment types it accepts; a model left out accepts every type.")

        @field_validator("accept")
        @classmethod
        def _normalise(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
            return {model: [normalise_type(t) for t in types] for model, types in value.items()}

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self.accept = {model: frozenset(types) for model, types in self.params.accept.items()}

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a violation naming the first attachment type the instance's model does not accept."""
        types = ctx.features.file_types
        if not types:
            return None
        model = candidate.spec.model
        accepted = self.accept.get(model)
        if accepted is None:
            return None
        for kind in types:
            if kind not in accepted:
                return Violation(constraint=self.name, metric="file_type", op="in", value=None,
                                 threshold=float(len(accepted)),
                                 reason=f"model {model} does not accept {kind} (accepts: "
                                        f"{', '.join(sorted(accepted)) or 'no attachments'})")
        return None
