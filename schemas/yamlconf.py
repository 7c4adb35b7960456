"""YAML text to a validated model, with errors that name file, line and field."""

from __future__ import annotations

from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from schemas.errors import ConfigError

__all__ = ["field_name", "locate", "parse_yaml_model"]

M = TypeVar("M", bound=BaseModel)


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """Walk the composed YAML tree along a pydantic error location; return a 1-based line."""
    node = root
    line = root.start_mark.line + 1 if root is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                break  # a missing key: the enclosing mapping is the best place to point at
            node = match
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if part >= len(node.value):
                break
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


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


def parse_yaml_model(model: type[M], text: str, source: str = "<string>") -> M:
    """Parse YAML ``text`` and validate it as ``model``.

    Args:
        model: The pydantic model class to build.
        text: The YAML document.
        source: File name used in error messages.

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
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if isinstance(p, (int, str)))
            problems.append((_line_of(root, loc), field_name(loc), err["msg"]))
        raise ConfigError(source, problems) from exc
