"""A line the JSON parser refused for a number that is not finite, refused naming the field that holds it.

Intake parses each record with orjson, which refuses ``NaN``, ``Infinity`` and ``-Infinity`` (not
JSON, though Python's ``json.dumps`` writes them) and a number beyond a double (``1e400``) with a
position only: ``malformed JSON: number is infinity when parsed as double: line 1 column 96``.
Only when orjson has refused a record is it read again here, with Python's ``json``, which takes
all of these (as NaN or an infinity). A record that then holds such a number is refused naming
each field that does: the contract's field the mapping fills from it, and the field as the line
wrote it when the two differ (``outcome.total_ms (duration_ms in the line)``). The record is
refused either way; one that holds no such number keeps orjson's reason. A JSON array body orjson
refuses is split into its items (:func:`item_bytes`), each judged on its own. Good lines never
come here: their parsing is orjson's alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ingest.intake.field_mapping import map_record

__all__ = ["REASON", "item_bytes", "non_finite_fields"]

REASON = "Input should be a finite number (the store holds no infinity or NaN)"
_LIMIT = 5  # fields named at most, as a validation error names its first errors
Path = tuple[str | int, ...]


def _leaves(value: Any, path: Path) -> Iterator[tuple[Path, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path, value


def _non_finite(value: Any) -> Iterator[tuple[Path, float]]:
    for path, leaf in _leaves(value, ()):
        if isinstance(leaf, float) and not math.isfinite(leaf):
            yield path, leaf


def item_bytes(item: Any) -> bytes:
    """An item of a JSON array that orjson refused whole, written again as a record of its own.

    By orjson, as for an array it reads, unless the item holds NaN or an infinity (orjson would write
    ``null``: the value lost) or a value orjson cannot write: then by Python's ``json``, whose ``NaN``,
    ``Infinity`` or lone surrogate the record's check refuses with its reason.
    """
    if next(_non_finite(item), None) is None:
        try:
            return orjson.dumps(item)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(item).encode()


def _dotted(path: Path) -> str:
    return ".".join(map(str, path)) or "<record>"


def non_finite_fields(
    raw: bytes, mapping: Mapping[str, list[str]] | None = None, hash_key: str | None = None,
) -> tuple[str, str | None] | None:
    """Why ``raw`` (a record orjson refused) is refused, when it holds NaN, an infinity or a number beyond a double.

    Returns:
        ``(reason, request_id)``: the reason names each such field (up to five) with :data:`REASON`;
        the request id is the record's own (or the mapped one's) when it has one. None when Python's
        ``json`` cannot read ``raw`` either, or reads no object, or no such number in it: the record
        is malformed otherwise, and orjson's reason stands.
    """
    try:
        # Each constant its own float, and a number beyond a double an infinity (float() gives one):
        # the mapping passes values through, so a mapped field is known by its value's identity.
        obj = json.loads(raw, parse_constant=float)
    except (ValueError, RecursionError):  # UnicodeDecodeError too
        return None
    found = list(_non_finite(obj)) if isinstance(obj, dict) else []  # a line that is no object: orjson's reason
    if not found:
        return None
    mapped: dict[int, str] = {}
    rid = obj.get("request_id")
    if mapping is not None:
        try:
            out = map_record(obj, mapping, hash_key)
        except (TypeError, ValueError, OverflowError):  # as check_record: the mapping cannot convert a value
            out = {}
        mapped = {id(value): _dotted(path) for path, value in _non_finite(out)}
        rid = out.get("request_id")
    names = []
    for path, value in found:
        line_name, field = _dotted(path), mapped.get(id(value))
        names.append(line_name if field is None or field == line_name else f"{field} ({line_name} in the line)")
    more = len(names) - _LIMIT
    reason = "; ".join(f"{name}: {REASON}" for name in names[:_LIMIT]) + (f"; and {more} more" if more > 0 else "")
    return reason, rid if isinstance(rid, str) and 0 < len(rid) <= 128 else None
