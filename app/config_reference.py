"""The configuration reference (``docs/configuration.md``), generated from the pydantic models.

:func:`render` walks :class:`schemas.config.RouteLensConfig`: one section per top-level section of
``routelens.yaml``, one table per model (field, type, default, description with its bounds) and one
sub-section per nested model, at the path where it first appears; a model met again is linked, not
repeated. Types are written as YAML sees them (``string``, ``list of ...``, ``map of ... to ...``,
Literal values quoted, unions joined with "or"). The output depends only on the models, so a test
holds the committed page equal to it. The walk and the types are :mod:`app.config_types`; docstrings
and descriptions become Markdown in :mod:`app.config_markdown`; here are the tables and the page.

``python -m app.config_reference`` writes the page; ``--check`` exits 1 when the committed page differs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from app.config_markdown import cell, markdown, prose
from app.config_types import Model, Section, children, join_or, plan, yaml_type
from schemas.config import RouteLensConfig

__all__ = ["DOC_PATH", "main", "render"]

DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_BOUNDS = (("gt", "> {}"), ("ge", "≥ {}"), ("lt", "< {}"), ("le", "≤ {}"),
           ("min_length", "length ≥ {}"), ("max_length", "length ≤ {}"), ("pattern", "matches `{}`"))
_LONG_DEFAULT = 60


def _bound(template: str, value: object) -> str:
    if template.startswith("matches"):
        return markdown(template.format(value))
    return template.format(value)


def _bounds(info: FieldInfo) -> str:
    found = [_bound(template, getattr(meta, attr)) for meta in info.metadata
             for attr, template in _BOUNDS if getattr(meta, attr, None) is not None]
    return f" *({', '.join(found)})*" if found else ""


def _held(section: Section) -> BaseModel | None:
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
    return prose(doc) if isinstance(doc, str) else ""


def _summary(annotation: Any) -> str:
    """The first line of the docstring of the one model a type names (a field's description otherwise)."""
    models = [model for model, _ in children(annotation)]
    doc = models[0].__dict__.get("__doc__") if len(models) == 1 else None
    return markdown(inspect.cleandoc(doc).splitlines()[0]) if isinstance(doc, str) else ""


def _table(model: Model, anchors: dict[Model, str], held: BaseModel | None = None) -> list[str]:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    long_defaults: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        default, shown = _default(info, anchors, held, name)
        text = markdown(info.description) if info.description else _summary(info.annotation)
        description = cell(text) + _bounds(info)
        lines.append(f"| `{key}` | {yaml_type(info.annotation, anchors)} | {default} | {description.strip()} |")
        if shown is not None:
            dumped = yaml.safe_dump(shown, allow_unicode=True, sort_keys=False, width=100).rstrip()
            long_defaults += ["", f"Default of `{key}`:", "", "```yaml", dumped, "```"]
    return lines + long_defaults


def render(root: Model = RouteLensConfig) -> str:
    """Return the configuration reference for ``root`` (default: the whole ``routelens.yaml``) as Markdown."""
    sections, anchors = plan(root)
    required = [f"`{info.alias or name}`" for name, info in root.model_fields.items() if info.is_required()]
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python -m app.config_reference` from the pydantic models in schemas/. "
        "Do not edit by hand: change the models, then run it again (a test compares this page with them). -->",
        "",
        "RouteLens reads one YAML file, `routelens.yaml` (`--config FILE` names another). Every section is "
        "optional except " + join_or(required or ["none"]) + ". Unknown keys are errors, and every error names "
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
                out += [prose(module.__doc__), ""]
        if section.model is None and section.field is not None:
            if section.field.description:
                out += [markdown(section.field.description), ""]
            models = [m for m, _ in children(section.field.annotation)]
            if models:
                links = join_or([f"[{m.__name__}](#{anchors[m]})" for m in models])
                out += [f"Type: {yaml_type(section.field.annotation, anchors)}; its fields are those of {links}."]
            else:
                out += [f"Type: {yaml_type(section.field.annotation, anchors)}."]
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
