"""The plugin framework: extension-point protocols, typed parameters, the registry.

The bottom of ``router_core``: it imports ``schemas``, :mod:`router_core.errors` and itself, nothing
else (``tests/router_core/test_framework_layer.py`` holds it).
"""

from router_core.framework.plugin import ExtensionPoint, Handle, PluginBase, PluginParams, clamp_unit, typed_name
from router_core.framework.registry import PluginRegistry
from router_core.framework.types import (
    Blocked,
    Candidate,
    Effective,
    Filter,
    Picked,
    Picker,
    RequestContext,
    Scored,
    Scorer,
)

__all__ = [
    "Blocked",
    "Candidate",
    "Effective",
    "ExtensionPoint",
    "Filter",
    "Handle",
    "Picked",
    "Picker",
    "PluginBase",
    "PluginParams",
    "PluginRegistry",
    "RequestContext",
    "Scored",
    "Scorer",
    "clamp_unit",
    "typed_name",
]
