"""Root of the RouteLens exception tree.

Every room raises subclasses of :class:`RoutelensError`::

    RoutelensError                  (schemas/errors.py)
    ├── ConfigError(ValueError)     (schemas/errors.py) bad YAML or values; names file, line, field
    ├── RoutingError                (router_core/errors.py)
    └── SinkError                   (ingest/errors.py)

``probes`` has no exception class of its own.
"""

from __future__ import annotations

__all__ = ["ConfigError", "RoutelensError"]


class RoutelensError(Exception):
    """Base class of every error RouteLens raises on purpose."""


class ConfigError(RoutelensError, ValueError):
    """A configuration file could not be loaded.

    Attributes:
        source: The file name (or ``<string>``).
        problems: One ``(line, field, message)`` tuple per problem; ``line`` is 1-based or None.
    """

    def __init__(self, source: str, problems: list[tuple[int | None, str, str]]) -> None:
        self.source = source
        self.problems = problems
        lines = [
            f"{source}:{line if line is not None else '?'}: {field}: {message}"
            for line, field, message in problems
        ]
        super().__init__("invalid configuration\n" + "\n".join(lines))
