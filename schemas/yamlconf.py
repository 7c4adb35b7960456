"""YAML text to a validated model, with errors that name file, line and field."""

from __future__ import annotations

from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from schemas.errors import ConfigError

__all__ = ["field_name", "locate", "node_at", "parse_yaml_model"]

M = TypeVar("M", bound=BaseModel)


def node_at(root: yaml.Node | None, loc: tuple[int | str, ...], *, key: bool = False) -> yaml.Node | None:
    """Walk the composed YAML tree along a pydantic error location; return the deepest node reached.

    A missing key or index stops the walk: the enclosing node is the best place to point at. With
    ``key``, a location ending in a mapping key returns the key's node (for "unknown field" errors).
    """
    node = root
    for i, part in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if pair is None:
                break
            node = pair[0] if key and i == len(loc) - 1 else pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
        else:
            break
    return node


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of :func:`node_at`."""
    node = node_at(root, loc)
    return None if node is None else node.start_mark.line + 1


def _in_document(data: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """Cut a pydantic location where the document's value stops being a container.

    Past a scalar the rest names pydantic's own steps (a union member's tag, a validator), not a
    field the user wrote; a missing key of a mapping stays (it is the field to add).
    """
    for i, part in enumerate(loc):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        elif data is not None:
            return loc[:i]
    return loc


def field_name(loc: tuple[int | str, ...]) -> str:
    """Render a location as ``router.plugins[2].weight``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def locate(text: str, loc: tuple[int | str, ...]) -> int | None:
    """Return the 1-based line of ``loc`` in the YAML ``text`` (the nearest enclosing node's line)."""
    try:
        return _line_of(yaml.compose(text, Loader=yaml.SafeLoader), loc)
    except yaml.YAMLError:
        return None


def parse_yaml_model(
    model: type[M], text: str, source: str = "<string>", *, context: dict[str, Any] | None = None
) -> M:
    """Parse YAML ``text`` and validate it as ``model``.

    Args:
        model: The pydantic model class to build.
        text: The YAML document.
        source: File name used in error messages.
        context: Pydantic's validation context (:func:`schemas.paths.path_context` resolves the
            paths the document names against its folder).

    Returns:
        The validated model.

    Raises:
        ConfigError: On YAML syntax errors or validation errors, naming line and field.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, [(line, "<yaml>", f"YAML syntax error: {problem}")]) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [(1, "<root>", "expected a mapping at the top level")])
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = _in_document(data, tuple(p for p in err["loc"] if isinstance(p, (int, str))))
            problems.append((_line_of(root, loc), field_name(loc), err["msg"]))
        raise ConfigError(source, problems) from exc
