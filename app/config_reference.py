"""The configuration reference (``docs/configuration.md``), generated from the pydantic models.

:func:`render` walks :class:`schemas.config.RouteLensConfig`: one section per top-level section of
``routelens.yaml``, one table per model (field, type, default, description with its bounds) and one
sub-section per nested model, at the path where it first appears; a model met again is linked, not
repeated. Types are written as YAML sees them (``string``, ``list of ...``, ``map of ... to ...``,
Literal values quoted, unions joined with "or"). The output depends only on the models, so a test
holds the committed page equal to it.

``python -m app.config_reference`` writes the page; ``--check`` exits 1 when the committed page differs.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import json
import re
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from schemas.config import RouteLensConfig

__all__ = ["DOC_PATH", "main", "render"]

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_SCALARS: dict[object, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               type(None): "null", Any: "any"}
_BOUNDS = (("gt", "> {}"), ("ge", "≥ {}"), ("lt", "< {}"), ("le", "≤ {}"),
           ("min_length", "length ≥ {}"), ("max_length", "length ≤ {}"), ("pattern", "matches `{}`"))
_LONG_DEFAULT = 60
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")
_RST_ROLE = re.compile(r":[a-z]+:(?=`)")
_LONE_STAR = re.compile(r"(?<!\*)\*(?!\*)")

Model = type[BaseModel]


@dataclass(frozen=True)
class _Section:
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


def _children(annotation: Any, suffix: str = "") -> Iterator[tuple[Model, str]]:
    """The models a field's type names, each with the path suffix its container adds."""
    annotation = _unwrap(annotation)
    origin = get_origin(annotation)
    if _is_model(annotation):
        yield annotation, suffix
    elif origin in (Union, types.UnionType):
        for member in get_args(annotation):
            yield from _children(member, suffix)
    elif origin in (list, set, frozenset, tuple, Sequence):
        for member in get_args(annotation):
            if member is not Ellipsis:
                yield from _children(member, suffix + "[]")
    elif origin is dict:
        yield from _children(get_args(annotation)[1], suffix + ".<name>")


def _plan(root: Model) -> tuple[list[_Section], dict[Model, str]]:
    """The sections in page order, and each model's anchor (the section it is rendered in)."""
    sections: list[_Section] = []
    anchors: dict[Model, str] = {}

    def visit(model: Model, path: str) -> None:
        for name, info in model.model_fields.items():
            for child, suffix in _children(info.annotation):
                if child not in anchors:
                    child_path = f"{path}.{info.alias or name}{suffix}"
                    anchors[child] = _slug(child_path)
                    sections.append(_Section(child_path, 3, child, info))
                    visit(child, child_path)

    for name, info in root.model_fields.items():
        key = info.alias or name
        models = [m for m, _ in _children(info.annotation)]
        fresh = next((m for m in models if m not in anchors), None)
        sections.append(_Section(key, 2, fresh, info))
        if fresh is not None:
            anchors[fresh] = _slug(key)
            visit(fresh, key)
    return sections, anchors


def _join_or(atoms: list[str]) -> str:
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


def _type(annotation: Any, anchors: dict[Model, str], nested: bool = False) -> str:
    """How a YAML writer reads a type: ``list of string``, ``"max" or "p2c"``, a link to a model."""
    annotation = _unwrap(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if _is_model(annotation):
        return f"[{annotation.__name__}](#{anchors[annotation]})"
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return _join_or([_literal(member) for member in annotation])
    if origin is Literal:
        return _join_or([_literal(value) for value in args])
    if origin in (Union, types.UnionType):
        atoms: list[str] = []
        for member in _members(annotation):
            if get_origin(member) is Literal:
                atoms.extend(_literal(value) for value in get_args(member))
            elif inspect.isclass(member) and issubclass(member, enum.Enum):
                atoms.extend(_literal(value) for value in member)
            else:
                text = _type(member, anchors, nested=True)
                atoms.append(f"({text})" if " of " in text else text)
        text = _join_or(atoms)
        return f"({text})" if nested and len(atoms) > 1 else text
    if (origin is tuple and len(args) == 2 and args[1] is Ellipsis) or origin in (list, set, frozenset, Sequence):
        return f"list of {_type(args[0], anchors, nested=True)}" if args else "list"
    if origin is tuple:
        return "\\[" + ", ".join(_type(arg, anchors, nested=True) for arg in args) + "\\]"
    if origin is dict:
        key, value = (_type(arg, anchors, nested=True) for arg in args)
        return f"map of {key} to {value}"
    return str(getattr(annotation, "__name__", annotation))


def _escape(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("<", "&lt;")
    return _LONE_STAR.sub("\\*", text).replace("|", "\\|")


def _markdown(text: str) -> str:
    """Docstring or description text as Markdown: roles dropped, specials escaped outside code spans.

    A code span holding ``|`` becomes escaped text: a table cell could not hold it otherwise in both
    Python-Markdown (MkDocs) and GitHub's Markdown.
    """
    parts = _CODE_SPAN.split(_RST_ROLE.sub("", text.replace("``", "`")))
    for i, part in enumerate(parts):
        if i % 2 == 0 or "|" in part:
            parts[i] = _escape(part.strip("`") if i % 2 else part)
    return "".join(parts)


def _prose(doc: str) -> str:
    """A reST docstring as Markdown: its ``::`` literal blocks become fenced YAML, the rest :func:`_markdown`."""
    out: list[str] = []
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(_markdown(line))
            i += 1
            continue
        head = line.rstrip()[:-1].rstrip()
        if head and head != ":":
            out.append(_markdown(head if head.endswith(":") else head + ":"))
        block: list[str] = []
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            block.append(lines[i])
            i += 1
        code = inspect.cleandoc("\n".join(block))
        out += (["", "```yaml", code, "```", ""] if out and out[-1] else ["```yaml", code, "```", ""])
    return "\n".join(out).strip()


def _cell(text: str) -> str:
    return " ".join(text.split())


def _bound(template: str, value: object) -> str:
    if template.startswith("matches"):
        return _markdown(template.format(value))
    return template.format(value)


def _bounds(info: FieldInfo) -> str:
    found = [_bound(template, getattr(meta, attr)) for meta in info.metadata
             for attr, template in _BOUNDS if getattr(meta, attr, None) is not None]
    return f" *({', '.join(found)})*" if found else ""


def _held(section: _Section) -> BaseModel | None:
    """The default a section's field holds its model with, where it is not the model's own (else None).

    ``resilience.breakers.model`` is a ``RateBreakerSettings(close_after=10)``: its table shows 10,
    not the class's 3 (another field holding the same model shows its own below its table).
    """
    info = section.field
    if info is None or section.model is None or info.is_required():
        return None
    value = info.get_default(call_default_factory=True, validated_data={})
    return value if type(value) is section.model else None


def _default(info: FieldInfo, anchors: dict[Model, str], held: BaseModel | None = None,
             name: str = "") -> tuple[str, object]:
    """The default's table cell, and the value to show below the table when it is too long for a cell.

    ``held``: the instance the section's field holds by default; its ``name`` field is the default here.
    """
    if info.is_required() and held is None:
        return "required", None
    value = getattr(held, name) if held is not None else info.get_default(call_default_factory=True,
                                                                           validated_data={})
    if isinstance(value, BaseModel):
        try:
            plain = type(value)() == value
        except ValueError:
            plain = False
        if plain:
            return "each field's default", None
    shown = to_jsonable_python(value)
    text = json.dumps(shown, ensure_ascii=False, separators=(", ", ": "))
    if len(text) > _LONG_DEFAULT or "|" in text or "`" in text:
        return "see below", shown
    return f"`{text}`", None


def _docstring(model: Model) -> str:
    doc = model.__dict__.get("__doc__")
    return _prose(doc) if isinstance(doc, str) else ""


def _summary(annotation: Any) -> str:
    """The first line of the docstring of the one model a type names (a field's description otherwise)."""
    models = [model for model, _ in _children(annotation)]
    doc = models[0].__dict__.get("__doc__") if len(models) == 1 else None
    return _markdown(inspect.cleandoc(doc).splitlines()[0]) if isinstance(doc, str) else ""


def _table(model: Model, anchors: dict[Model, str], held: BaseModel | None = None) -> list[str]:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    long_defaults: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        default, shown = _default(info, anchors, held, name)
        text = _markdown(info.description) if info.description else _summary(info.annotation)
        description = _cell(text) + _bounds(info)
        lines.append(f"| `{key}` | {_type(info.annotation, anchors)} | {default} | {description.strip()} |")
        if shown is not None:
            dumped = yaml.safe_dump(shown, allow_unicode=True, sort_keys=False, width=100).rstrip()
            long_defaults += ["", f"Default of `{key}`:", "", "```yaml", dumped, "```"]
    return lines + long_defaults


def render(root: Model = RouteLensConfig) -> str:
    """Return the configuration reference for ``root`` (default: the whole ``routelens.yaml``) as Markdown."""
    sections, anchors = _plan(root)
    required = [f"`{info.alias or name}`" for name, info in root.model_fields.items() if info.is_required()]
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m app.config_reference` from the pydantic models in schemas/. "
        "Do not edit by hand: change the models, then run it again (a test compares this page with them). -->",
        "",
        "RouteLens reads one YAML file, `routelens.yaml` (`--config FILE` names another). Every section is "
        "optional except " + _join_or(required or ["none"]) + ". Unknown keys are errors, and every error names "
        "the file, line and field. A relative path is relative to the folder of the file that names it.",
        "",
        "## Sections",
        "",
        *_table(root, anchors),
    ]
    modules_shown = {root.__module__}
    for section in sections:
        out += ["", f"{'#' * section.level} `{section.path}`", ""]
        module = sys.modules[section.model.__module__] if section.model is not None else None
        if section.level == 2 and module is not None and module.__name__ not in modules_shown:
            modules_shown.add(module.__name__)
            if module.__doc__:
                out += [_prose(module.__doc__), ""]
        if section.model is None and section.field is not None:
            if section.field.description:
                out += [_markdown(section.field.description), ""]
            models = [m for m, _ in _children(section.field.annotation)]
            if models:
                links = _join_or([f"[{m.__name__}](#{anchors[m]})" for m in models])
                out += [f"Type: {_type(section.field.annotation, anchors)}; its fields are those of {links}."]
            else:
                out += [f"Type: {_type(section.field.annotation, anchors)}."]
            continue
        assert section.model is not None
        if doc := _docstring(section.model):
            out += [doc, ""]
        out += _table(section.model, anchors, _held(section))
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write the reference page, or with ``--check`` compare the committed one; return the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m app.config_reference", description="Write docs/configuration.md from the configuration models."
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the models")
    parser.add_argument("--output", type=Path, default=DOC_PATH, help=f"the page (default: {DOC_PATH})")
    args = parser.parse_args(argv)
    page = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != page:
            print(f"{args.output} is out of date with the configuration models: run python -m app.config_reference",
                  file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
