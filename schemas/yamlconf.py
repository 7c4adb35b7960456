"""YAML text to a validated model, with errors that name file, line and field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from schemas.errors import ConfigError

__all__ = [
    "DuplicateKey",
    "DuplicateKeyError",
    "UniqueKeyLoader",
    "field_name",
    "in_document",
    "locate",
    "one_per_place",
    "node_at",
    "parse_yaml_model",
]

M = TypeVar("M", bound=BaseModel)
_MERGE = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class DuplicateKey:
    """A key a mapping names a second time.

    Attributes:
        path: Where the second one is, as a pydantic location (``("gateway", "port")``).
        line: Its 1-based line.
        col: Its 1-based column.
        first_line: The 1-based line of the first one.
    """

    path: tuple[int | str, ...]
    line: int
    col: int
    first_line: int

    def message(self, *, column: bool = False) -> str:
        """The message that follows the field (``column``: say the column, for errors that only print a line)."""
        at = f" at column {self.col}" if column else ""
        return f"duplicate key{at}, first at line {self.first_line} (YAML would silently keep only the last)"


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A document names a key twice in one mapping; :attr:`duplicates` lists every such key in file order."""

    def __init__(self, duplicates: list[DuplicateKey], first: yaml.Mark, second: yaml.Mark) -> None:
        super().__init__("while composing a mapping", first, f"found duplicate key {duplicates[0].path[-1]!r}", second)
        self.duplicates = duplicates


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names a key twice (:class:`DuplicateKeyError`).

    YAML itself keeps the last value without a word: a policy with two ``routing_matrix:`` blocks
    or a config with two ``gateway:`` ones would run on half of what its author wrote. The check
    runs on the composed tree, before construction flattens merge keys: a key that overrides one
    merged in with ``<<`` is not a duplicate, and ``<<`` itself may repeat (each merge adds, none is lost).
    Keys compare by tag and text as written (``port`` and ``"port"`` are the same key).
    """

    def compose_document(self) -> yaml.Node | None:
        """Compose the document as PyYAML does, then refuse its duplicate keys."""
        node = super().compose_document()
        _refuse_duplicates(node)
        return node


def _refuse_duplicates(root: yaml.Node | None) -> None:
    """Raise :class:`DuplicateKeyError` naming every key given twice in a mapping of ``root``."""
    found: list[tuple[yaml.Mark, yaml.Mark, DuplicateKey]] = []
    seen: set[int] = set()  # an alias shares its anchor's node: check it once
    stack: list[tuple[yaml.Node, tuple[int | str, ...]]] = [] if root is None else [(root, ())]
    while stack:  # not recursive: a deep document would hit the recursion limit here, not in PyYAML
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            firsts: dict[tuple[str, str], yaml.Node] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "?"
                if isinstance(key, yaml.ScalarNode) and key.tag != _MERGE:
                    first = firsts.setdefault((key.tag, key.value), key)
                    if first is not key:
                        mark = key.start_mark
                        found.append((first.start_mark, mark, DuplicateKey(
                            (*path, name), mark.line + 1, mark.column + 1, first.start_mark.line + 1)))
                stack.append((value, (*path, name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
    if found:
        found.sort(key=lambda f: (f[1].line, f[1].column))
        raise DuplicateKeyError([d for _, _, d in found], found[0][0], found[0][1])


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
    field the user wrote; a missing key of a mapping stays when it ends the location (it is the
    field to add). One the location goes on past is pydantic's too (a tagged union's member, as
    ``inline`` in ``experiments.shadow.policy.inline.router``): it is dropped, the mapping kept, so
    the path reads as written and its line is the field's, not the mapping's first key's.
    """
    kept: list[int | str] = []
    for i, part in enumerate(loc):
        if isinstance(data, dict):
            if part not in data and i < len(loc) - 1:
                continue
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        elif data is not None:
            return tuple(kept)
        kept.append(part)
    return tuple(kept)


def in_document(data: Any, loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """:func:`_in_document`, for other readers of YAML documents (the policy files' loader)."""
    return _in_document(data, loc)


K = TypeVar("K")


def one_per_place(errors: list[tuple[K, str]]) -> list[tuple[K, str]]:
    """One message per place, in first-seen order: a value no member of a union takes gets one line, not one a member.

    ``priority: urgent`` fails both ``low|normal|high`` and an integer; the author reads
    "Input should be 'low', 'normal' or 'high'; or input should be a valid integer".
    """
    merged: dict[K, list[str]] = {}
    for place, message in errors:
        said = merged.setdefault(place, [])
        if message not in said:
            said.append(message)
    return [(place, "; or ".join([said[0], *(m[:1].lower() + m[1:] for m in said[1:])]))
            for place, said in merged.items()]


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
        ConfigError: On YAML syntax errors, a key given twice in a mapping, or validation errors,
            naming line and field.
    """
    try:
        root = yaml.compose(text, Loader=UniqueKeyLoader)
        data = yaml.load(text, Loader=UniqueKeyLoader)
    except DuplicateKeyError as exc:
        raise ConfigError(source, [(d.line, field_name(d.path), d.message(column=True))
                                   for d in exc.duplicates]) from exc
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
            problems.append(((_line_of(root, loc), field_name(loc)), err["msg"]))
        raise ConfigError(source, [(line, name, msg) for (line, name), msg in one_per_place(problems)]) from exc
