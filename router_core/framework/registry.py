"""``PluginRegistry``: plugin type name -> factory, and building plugins from specs.

A registry is an instance, not a module-level dict: :func:`router_core.decide.builtin.register_builtin`
fills one with the in-tree plugins, and tests or simulations add fakes to their own.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from router_core.errors import DuplicatePluginType, PluginConfigError, UnknownPluginType
from router_core.framework.plugin import ExtensionPoint, Handle, PluginBase
from schemas.config import PluginSpec

__all__ = ["PluginRegistry"]

Loc = tuple[int | str, ...]


class PluginRegistry:
    """Known plugin types and how to build them."""

    def __init__(self) -> None:
        self._factories: dict[str, type[PluginBase]] = {}

    def register(self, type_: str, factory: type[PluginBase]) -> None:
        """Make ``type_`` buildable by ``factory``: a plugin class (its ``Params`` and ``from_spec``).

        Raises:
            DuplicatePluginType: When ``type_`` is registered already.
        """
        if type_ in self._factories:
            raise DuplicatePluginType(f"plugin type {type_!r} is registered twice")
        self._factories[type_] = factory

    def extension_point(self, type_: str) -> ExtensionPoint:
        """Return where plugins of ``type_`` plug in (``filter``, ``scorer`` or ``picker``)."""
        return self._factories[type_].EXTENSION_POINT

    def catalogue(self) -> list[dict[str, str]]:
        """Every registered type as ``{"type", "extension_point"}``, in registration order."""
        return [{"type": t, "extension_point": f.EXTENSION_POINT} for t, f in self._factories.items()]

    def create(self, spec: PluginSpec, handle: Handle, *, loc: Loc = ()) -> Any:
        """Build the plugin ``spec`` describes.

        Args:
            spec: Type, optional name and parameters.
            handle: What the router injects (model profiles).
            loc: Where ``spec`` sits in the configuration, for error messages.

        Raises:
            UnknownPluginType: When ``spec.type`` is not registered.
            PluginConfigError: When its parameters do not validate (names ``name/type`` and field).
        """
        factory = self._factories.get(spec.type)
        label = f"{spec.name or (factory.DEFAULT_NAME if factory else '') or '<unnamed>'}/{spec.type}"
        if factory is None:
            known = ", ".join(sorted(self._factories))
            raise UnknownPluginType(label, [(loc + ("type",), f"unknown plugin type {spec.type!r}; known: {known}")])
        if not (spec.name or factory.DEFAULT_NAME):
            raise PluginConfigError(label, [(loc + ("name",), f"a {spec.type} needs a name")])
        try:
            return factory.from_spec(spec.name, factory.Params.model_validate(spec.parameters, context=handle), handle)
        except ValidationError as exc:
            problems = [(loc + ("parameters", *(p for p in e["loc"] if isinstance(p, (int, str)))), e["msg"])
                        for e in exc.errors()]
            raise PluginConfigError(label, problems) from exc
