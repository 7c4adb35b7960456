"""Helpers shared by scorers."""

from __future__ import annotations

from router_core.framework import Candidate, DecisionContext
from schemas.config import ModelProfile

__all__ = ["profile_of"]

_DEFAULT_PROFILE = ModelProfile()


def profile_of(c: Candidate, ctx: DecisionContext) -> ModelProfile:
    """The router's profile of ``c``'s model (defaults when the configuration has none)."""
    return ctx.models.get(c.spec.model, _DEFAULT_PROFILE)
