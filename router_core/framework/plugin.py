"""What every plugin shares: typed parameters, the injected :class:`Handle`, and its typed name.

A plugin class has ``TYPE`` (kebab-case, role suffix), ``EXTENSION_POINT``, a nested ``Params``
model (a :class:`PluginParams`: unknown keys are errors, values frozen, ranges validated) and a
``from_spec(name, params, handle)`` classmethod, the only way the registry builds it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict

from schemas.config import ModelProfile, ScrapeSettings

__all__ = ["ExtensionPoint", "Handle", "PluginBase", "PluginParams", "clamp_unit", "typed_name"]

ExtensionPoint = Literal["filter", "scorer", "picker"]

_DEFAULT_PROFILE = ModelProfile()


class PluginParams(BaseModel):
    """Base of every plugin's ``Params``: strict keys, frozen values."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Handle:
    """What the router owns and injects into plugin factories (never module globals).

    It is also the validation context of every plugin's ``Params`` (``info.context``), so a
    parameter can be checked against the router's own settings.

    Attributes:
        models: What the router believes about each model (latency, concurrency, quality priors).
        scrape: How old state may get (suspect, then stale); state-only verdicts are memoised until
            it is suspect.
    """

    models: Mapping[str, ModelProfile] = field(default_factory=dict)
    scrape: ScrapeSettings = field(default_factory=ScrapeSettings)

    def profile(self, model: str) -> ModelProfile:
        """Return ``model``'s profile (defaults when the configuration has none)."""
        return self.models.get(model, _DEFAULT_PROFILE)


class PluginBase:
    """The common constructor of in-tree plugins: a name, validated parameters and the handle.

    Subclasses set ``TYPE``, ``EXTENSION_POINT``, ``DEFAULT_NAME`` and a nested ``Params``, and
    override ``__init__`` only to precompute from their parameters.
    """

    TYPE: ClassVar[str]
    EXTENSION_POINT: ClassVar[ExtensionPoint]
    DEFAULT_NAME: ClassVar[str]
    Params: ClassVar[type[PluginParams]] = PluginParams

    def __init__(self, name: str, params: Any, handle: Handle) -> None:
        self.name = name
        self.params = params
        self.handle = handle

    @classmethod
    def from_spec(cls, name: str | None, params: Any, handle: Handle) -> Self:
        """Build the plugin named ``name`` (None: ``DEFAULT_NAME``) from validated ``params``."""
        return cls(name or cls.DEFAULT_NAME, params, handle)


def typed_name(plugin: Any) -> str:
    """Return ``name/type``, the way traces and metrics name a plugin instance."""
    return f"{plugin.name}/{plugin.TYPE}"


def clamp_unit(values: list[float]) -> list[float]:
    """Clamp raw plugin output to [0, 1], so an out-of-range plugin cannot break a trace."""
    return [0.0 if x < 0.0 else 1.0 if x > 1.0 else x for x in values]
