"""Storage schemas derived from the pydantic models, so that the models stay the one definition.

:func:`arrow_schema` maps a model onto an Arrow schema (nested models become structs, lists become
list columns); DuckDB creates its tables from it. :func:`json_schema` is the published contract.
"""

from __future__ import annotations

import types
from datetime import datetime
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

from schemas.trace import DecisionTrace

__all__ = ["arrow_schema", "arrow_type", "json_schema"]

_SCALARS: dict[type, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def arrow_type(annotation: Any) -> tuple[pa.DataType, bool]:
    """Map one Python annotation to ``(arrow type, nullable)``.

    Raises:
        TypeError: For annotations with no faithful Arrow form (dicts, unions of several types).
    """
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"union {annotation!r} has no single Arrow type")
        return arrow_type(args[0])[0], True
    if origin is list:
        (item,) = get_args(annotation)
        item_type, _ = arrow_type(item)
        return pa.list_(item_type), False
    if origin is Literal:
        return pa.string(), False
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return pa.struct(_fields(annotation)), False
        if issubclass(annotation, Enum):
            return pa.string(), False
        for py_type, arrow in _SCALARS.items():
            if annotation is py_type:
                return arrow, False
    raise TypeError(f"no Arrow type for {annotation!r}")


def _fields(model: type[BaseModel]) -> list[pa.Field]:
    out = []
    for name, info in model.model_fields.items():
        dtype, nullable = arrow_type(info.annotation)
        out.append(pa.field(name, dtype, nullable=nullable))
    return out


def arrow_schema(model: type[BaseModel] = DecisionTrace) -> pa.Schema:
    """Return the Arrow schema of ``model`` (by default :class:`DecisionTrace`)."""
    return pa.schema(_fields(model))


def json_schema(model: type[BaseModel] = DecisionTrace) -> dict[str, Any]:
    """Return the JSON Schema (draft 2020-12) of ``model`` as pydantic generates it."""
    return model.model_json_schema(mode="serialization")
