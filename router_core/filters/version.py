"""Version rules: some models may only be served by builds at or above a minimum version."""

from __future__ import annotations

from typing import ClassVar

from router_core.framework import Candidate, DecisionContext
from schemas.trace import Violation

__all__ = ["VersionFilter"]


def _parse(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class VersionFilter:
    """Rejects instances of a model whose version is below ``min_versions[model]``.

    What it does: the seed's "must use v2.0 or later" business rule. An instance without a declared
    version does not satisfy a rule for its model. Models without a rule pass.
    Inputs consumed: ``InstanceSpec.model`` and ``InstanceSpec.version``.
    Parameters: ``router.min_versions`` (model -> dotted version).
    Category: filter.
    """

    TYPE: ClassVar[str] = "version-filter"
    STATE_ONLY: ClassVar[bool] = True

    def __init__(self, min_versions: dict[str, str], name: str = "version") -> None:
        self.name = name
        self._min = {model: _parse(v) for model, v in min_versions.items()}
        self._text = dict(min_versions)

    def check(self, candidate: Candidate, ctx: DecisionContext) -> Violation | None:
        """Return a violation when the instance's build is older than its model's rule."""
        spec = candidate.spec
        floor = self._min.get(spec.model)
        if floor is None or (spec.version is not None and _parse(spec.version) >= floor):
            return None
        return Violation(constraint=self.name, metric="version", op=">=", value=None, threshold=0.0,
                         reason=f"{spec.model} needs version >= {self._text[spec.model]}, "
                                f"instance has {spec.version or 'none declared'}")
