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

_WHOLE_FILE = "<file>"  # the field of a problem of the file itself (it cannot be read...): not repeated


class RoutelensError(Exception):
    """Base class of every error RouteLens raises on purpose."""


class ConfigError(RoutelensError, ValueError):
    """A configuration file (or another file the program reads: routes, policy) could not be loaded.

    Rendered as a heading (``invalid configuration``, or ``invalid <what>``) and one line per
    problem, ``FILE:LINE: FIELD: message`` (``?`` for a line not known); a problem of the file itself
    (field ``<file>``: it cannot be read) is ``FILE: message``, or ``FILE:LINE: message``.

    Attributes:
        source: The file name (or ``<string>``).
        problems: One ``(line, field, message)`` tuple per problem; ``line`` is 1-based or None.
        what: What the file is, for the heading (``configuration``, ``routes file``...).
    """

    def __init__(self, source: str, problems: list[tuple[int | None, str, str]], *,
                 what: str = "configuration") -> None:
        self.source = source
        self.problems = problems
        self.what = what
        lines = [f"{source}:{line}: {message}" if field == _WHOLE_FILE and line is not None
                 else f"{source}: {message}" if field == _WHOLE_FILE
                 else f"{source}:{line if line is not None else '?'}: {field}: {message}"
                 for line, field, message in problems]
        super().__init__(f"invalid {what}\n" + "\n".join(lines))

