"""The plugin framework: extension-point protocols, typed parameters, the registry."""

from router_core.framework.plugin import ExtensionPoint, Handle, PluginBase, PluginParams, clamp_unit, typed_name
from router_core.framework.registry import PluginRegistry
from router_core.framework.types import Candidate, DecisionContext, Filter, Picked, Picker, Scored, Scorer

__all__ = [
    "Candidate",
    "DecisionContext",
    "ExtensionPoint",
    "Filter",
    "Handle",
    "Picked",
    "Picker",
    "PluginBase",
    "PluginParams",
    "PluginRegistry",
    "Scored",
    "Scorer",
    "clamp_unit",
    "typed_name",
]
