"""Public names a package loads on first use (PEP 562), so that importing the package does not pay for them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, where: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """Return a module ``__getattr__`` that imports each name of ``where`` from its module on first use.

    Args:
        package: The package's name, for the ``AttributeError`` of an unknown name.
        where: Public name -> ``module`` or ``module:name_there`` (when it is defined under another name).
        namespace: The package's ``globals()``: a loaded name is kept there, so later lookups skip the hook.
    """

    def __getattr__(name: str) -> Any:
        spec = where.get(name)
        if spec is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, defined_as = spec.partition(":")
        value = getattr(importlib.import_module(module), defined_as or name)
        namespace[name] = value
        return value

    return __getattr__
