"""How the configuration reference reads the models: the page's sections, and each type in YAML terms.

:func:`plan` walks a root model into the page's sections (one per top-level field, one per nested
model at the path where it first appears) and each model's anchor; :func:`yaml_type` writes a field's
type as YAML sees it (``string``, ``list of ...``, ``map of ... to ...``, Literal values quoted,
unions joined with "or", a model as a link to its anchor). Used by :mod:`app.config_reference`.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["Model", "Section", "children", "join_or", "plan", "yaml_type"]

_SCALARS: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               type(None): "null", Any: "any"}

Model = type[BaseModel]


@dataclass(frozen=True)
class Section:
    """One section of the page: its path (the heading), its level, its model (None: a plain field) and its field."""

    path: str
    level: int
    model: Model | None
    field: FieldInfo | None = None


def _slug(path: str) -> str:
    """The heading id both MkDocs and GitHub give a heading that is ``path`` in backticks."""
    return re.sub(r"[^a-z0-9_-]", "", path.lower())


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return inspect.isclass(annotation) and issubclass(annotation, BaseModel)


def children(annotation: Any, suffix: str = "") -> Iterator[tuple[Model, str]]:
    """The models a field's type names, each with the path suffix its container adds."""
    annotation = _unwrap(annotation)
    origin = get_origin(annotation)
    if _is_model(annotation):
        yield annotation, suffix
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from children(member, suffix)
    elif origin in (list, set, frozenset, tuple, Sequence):
        for member in get_args(annotation):
            if member is not Ellipsis:
                yield from children(member, suffix + "[]")
    elif origin is dict:
        yield from children(get_args(annotation)[1], suffix + ".<name>")


def plan(root: Model) -> tuple[list[Section], dict[Model, str]]:
    """The sections in page order, and each model's anchor (the section it is rendered in)."""
    sections: list[Section] = []
    anchors: dict[Model, str] = {}

    def visit(model: Model, path: str) -> None:
        for name, info in model.model_fields.items():
            for child, suffix in children(info.annotation):
                if child not in anchors:
                    child_path = f"{path}.{info.alias or name}{suffix}"
                    anchors[child] = _slug(child_path)
                    sections.append(Section(child_path, 3, child, info))
                    visit(child, child_path)

    for name, info in root.model_fields.items():
        key = info.alias or name
        models = [m for m, _ in children(info.annotation)]
        fresh = next((m for m in models if m not in anchors), None)
        sections.append(Section(key, 2, fresh, info))
        if fresh is not None:
            anchors[fresh] = _slug(key)
            visit(fresh, key)
    return sections, anchors


def join_or(atoms: list[str]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    return atoms[0] if len(atoms) == 1 else ", ".join(atoms[:-1]) + " or " + atoms[-1]


def _literal(value: object) -> str:
    return f"`{json.dumps(value.value if isinstance(value, enum.Enum) else value, ensure_ascii=False)}`"


def _members(annotation: Any) -> Iterator[Any]:
    """A union's members, nested unions (an alias inside ``X | None``) flattened."""
    for member in get_args(annotation):
        member = _unwrap(member)
        if get_origin(member) in (Union, types.UnionType):
            yield from _members(member)
        else:
            yield member


def yaml_type(annotation: Any, anchors: dict[Model, str], nested: bool = False) -> str:
    """How a YAML writer reads a type: ``list of string``, ``"max" or "p2c"``, a link to a model."""
    annotation = _unwrap(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if _is_model(annotation):
        return f"[{annotation.__name__}](#{anchors[annotation]})"
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return join_or([_literal(member) for member in annotation])
    if origin is Literal:
        return join_or([_literal(value) for value in args])
    if origin in (Union, types.UnionType):
        atoms: list[str] = []
        for member in _members(annotation):
            if get_origin(member) is Literal:
                atoms.extend(_literal(value) for value in get_args(member))
            elif inspect.isclass(member) and issubclass(member, enum.Enum):
                atoms.extend(_literal(value) for value in member)
            else:
                text = yaml_type(member, anchors, nested=True)
                atoms.append(f"({text})" if " of " in text else text)
        text = join_or(atoms)
        return f"({text})" if nested and len(atoms) > 1 else text
    if (origin is tuple and len(args) == 2 and args[1] is Ellipsis) or origin in (list, set, frozenset, Sequence):
        return f"list of {yaml_type(args[0], anchors, nested=True)}" if args else "list"
    if origin is tuple:
        return "\\[" + ", ".join(yaml_type(arg, anchors, nested=True) for arg in args) + "\\]"
    if origin is dict:
        key, value = (yaml_type(arg, anchors, nested=True) for arg in args)
        return f"map of {key} to {value}"
    return str(getattr(annotation, "__name__", annotation))
