r"""A trace holding text that is not UTF-8, made storable: each such byte written as ``\xNN``.

A lone surrogate (a header byte that was not UTF-8, decoded by aiohttp with ``surrogateescape``)
has no UTF-8 encoding, so orjson (the spool's encoder) and pydantic's JSON both refuse the whole
trace, and the request's decision was lost. ``errors_middleware`` now refuses such headers
before any route reads them; should one reach a trace some other way, :class:`TraceFinisher`
stores the trace with the bytes escaped (readable, and every other value as it was) rather than
lose it. Only the failure path walks the trace: nothing here runs for a trace that encodes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from router_core.wire_bytes import wire_bytes

__all__ = ["escape_surrogates"]


def escape_surrogates(value: Any, where: str = "") -> tuple[Any, list[str]]:
    r"""``value`` with every string holding a lone surrogate escaped, and where those strings were.

    Walks dicts, lists, tuples, dataclasses and models (copied where something changed: frozen
    models through ``model_copy``); anything else is returned as it is. A string from aiohttp
    keeps its bytes: ``"a\udcff"`` (a lone surrogate) becomes ``"a\xff"`` (the escape as text).
    """
    if isinstance(value, str):
        if value.isascii():
            return value, []
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return wire_bytes(value).decode("utf-8", "backslashreplace"), [where or "<value>"]
        return value, []
    if isinstance(value, BaseModel):
        updates, found = _walk(value.__dict__.items(), where)
        return (value.model_copy(update=updates) if updates else value), found
    if isinstance(value, dict):
        updates, found = _walk(value.items(), where)
        return ({**value, **updates} if updates else value), found
    if isinstance(value, list | tuple):
        items, found = _walk(enumerate(value), where)
        if not items:
            return value, found
        out = [items.get(i, v) for i, v in enumerate(value)]
        if isinstance(value, list):
            return out, found
        return (type(value)(*out) if hasattr(value, "_fields") else tuple(out)), found  # a named tuple, or not
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        updates, found = _walk(((f.name, getattr(value, f.name)) for f in dataclasses.fields(value)), where)
        return (dataclasses.replace(value, **updates) if updates else value), found
    return value, []


def _walk(pairs: Any, where: str) -> tuple[dict[Any, Any], list[str]]:
    """The changed members of ``pairs`` (key -> escaped value) and the paths of what was escaped."""
    updates: dict[Any, Any] = {}
    found: list[str] = []
    for key, item in pairs:
        path = f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key}" if where else str(key))
        fixed, inner = escape_surrogates(item, path)
        if inner:
            updates[key] = fixed
            found += inner
    return updates, found
