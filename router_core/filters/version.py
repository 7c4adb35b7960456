"""Version rules: some models may only be served by builds at or above a minimum version."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import Field

from router_core.framework import Candidate, Handle, PluginBase, PluginParams, RequestContext
from router_core.framework.plugin import ExtensionPoint
from schemas.trace import Violation

__all__ = ["VersionFilter"]


def _parse(version: str) -> tuple[int, ...]:
    """``"2.0.1"`` -> ``(2, 0, 1)``, trailing zeros dropped so that ``2`` and ``2.0`` compare equal."""
    parts = [int(part) for part in version.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class VersionFilter(PluginBase):
    """Rejects instances of a model whose version is below ``min_versions[model]``.

    What it does: the seed's "must use v2.0 or later" business rule. An instance without a declared
    version does not satisfy a rule for its model. Models without a rule pass.
    Inputs consumed: ``InstanceSpec.model`` and ``InstanceSpec.version``.
    Parameters: ``min_versions`` (model -> dotted version; derived from ``router.min_versions``).
    Category: filter.
    """

    TYPE: ClassVar[str] = "version-filter"
    EXTENSION_POINT: ClassVar[ExtensionPoint] = "filter"
    DEFAULT_NAME: ClassVar[str] = "version"
    STATE_ONLY: ClassVar[bool] = True

    class Params(PluginParams):
        """Parameters of :class:`VersionFilter`."""

        min_versions: dict[str, Annotated[str, Field(pattern=r"^\d+(\.\d+)*$")]] = Field(min_length=1)

    params: Params

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        super().__init__(name, params, handle)
        self._min = {model: _parse(v) for model, v in self.params.min_versions.items()}

    def check(self, candidate: Candidate, ctx: RequestContext) -> Violation | None:
        """Return a violation when the instance's build is older than its model's rule."""
        spec = candidate.spec
        floor = self._min.get(spec.model)
        if floor is None or (spec.version is not None and _parse(spec.version) >= floor):
            return None
        return Violation(constraint=self.name, metric="version", op=">=", value=None, threshold=0.0,
                         reason=f"{spec.model} needs version >= {self.params.min_versions[spec.model]}, "
                                f"instance has {spec.version or 'none declared'}")
