"""Validating traces that come from outside (``POST /v1/traces``, ``routelens ingest import``).

Input is NDJSON (one JSON object per line) or one JSON array. Every record is checked on its own:
size, JSON syntax (``NaN``, ``Infinity`` or a number beyond a double, ``1e400``, is refused naming
its field: :mod:`ingest.intake.non_finite`), the field mapping (:mod:`ingest.intake.field_mapping`),
the :class:`DecisionTrace` model (wrong types, unknown fields, bad hashes...), then the numbers no
store can hold (an integer beyond 64 bits, an infinite float: :mod:`ingest.intake.store_range`).
The result says, per line, whether the record was accepted and, if not, why; refused records are
quarantined by the caller.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError

from ingest.intake.field_mapping import map_record
from ingest.intake.non_finite import item_bytes, non_finite_fields
from ingest.intake.store_range import beyond_store
from ingest.kinds import Kind
from ingest.pipeline.quarantine import describe_validation_error
from schemas.trace import DecisionTrace

if TYPE_CHECKING:
    from ingest.pipeline.emitter import TraceEmitter

__all__ = ["LineResult", "check_record", "split_records", "take_records"]


@dataclass
class LineResult:
    """The verdict on one input record (``line`` is 1-based)."""

    line: int
    trace: DecisionTrace | None = None
    reason: str | None = None
    request_id: str | None = None


def split_records(body: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line, raw record)`` from NDJSON or a JSON array (blank lines are skipped).

    A body that starts with ``[`` is read as one array; if it does not parse, it is yielded as a
    single record so that the caller reports the syntax error. One that orjson refuses but Python's
    ``json`` reads (an item holds ``NaN``, ``Infinity`` or ``1e400``) is yielded item by item
    (:func:`ingest.intake.non_finite.item_bytes`): each such item is then refused on its own, naming its field.
    """
    if body.lstrip()[:1] == b"[":
        try:
            items = orjson.loads(body)
        except orjson.JSONDecodeError:
            try:
                lenient = json.loads(body, parse_constant=float)
            except (ValueError, RecursionError):
                lenient = None
            if not isinstance(lenient, list):
                yield 1, body
                return
            for i, item in enumerate(lenient, 1):
                yield i, item_bytes(item)
            return
        for i, item in enumerate(items, 1):
            yield i, orjson.dumps(item)
        return
    for i, line in enumerate(body.split(b"\n"), 1):
        if line.strip():
            yield i, line.rstrip(b"\r")


def _request_id(obj: Mapping[str, Any]) -> str | None:
    rid = obj.get("request_id")
    return rid if isinstance(rid, str) and 0 < len(rid) <= 128 else None


def check_record(
    line: int,
    raw: bytes,
    *,
    mapping: Mapping[str, list[str]] | None = None,
    max_bytes: int = 1024 * 1024,
    hash_key: str | None = None,
) -> LineResult:
    """Validate one record; never raises."""
    res = LineResult(line)
    if len(raw) > max_bytes:
        res.reason = f"record of {len(raw)} bytes exceeds the limit of {max_bytes}"
        return res
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:  # NaN, Infinity or 1e400 in it? Then it is refused naming the field
        named = non_finite_fields(raw, mapping, hash_key)
        res.reason, res.request_id = (f"malformed JSON: {exc}", None) if named is None else \
            (f"invalid trace: {named[0]}", named[1])
        return res
    if not isinstance(obj, dict):
        res.reason = f"a trace must be a JSON object, not {type(obj).__name__}"
        return res
    if mapping is not None:
        try:
            obj = map_record(obj, mapping, hash_key)
        except (TypeError, ValueError, OverflowError) as exc:  # a value the mapping cannot convert
            res.request_id = _request_id(obj)
            res.reason = f"cannot be mapped: {type(exc).__name__}"
            return res
    res.request_id = _request_id(obj)
    try:
        trace = DecisionTrace.model_validate(obj)
    except ValidationError as exc:
        res.reason = f"invalid trace: {describe_validation_error(exc)}"
        return res
    beyond = beyond_store(trace, raw)
    if beyond is not None:
        res.reason = f"invalid trace: {beyond}"
    else:
        res.trace = trace
    return res


def take_records(
    records: Iterable[tuple[int, bytes]],
    emitter: TraceEmitter,
    *,
    source: str,
    mapping: Mapping[str, list[str]] | None = None,
    hash_key: str | None = None,
) -> Iterator[LineResult]:
    """Check each record, emit the good ones, quarantine the others (as from ``source``); yield each verdict.

    An emitted trace the store refuses later (a different trace holds its ``request_id``) is
    quarantined as from its line too: its origin is filed with the emitter's batcher
    (:mod:`ingest.pipeline.origins`) before it is emitted.
    """
    max_bytes = emitter.settings.spool.max_record_bytes
    origins = emitter.batcher.origins
    for line, raw in records:
        res = check_record(line, raw, mapping=mapping, max_bytes=max_bytes, hash_key=hash_key)
        if res.trace is not None:
            token = origins.add(res.trace.request_id, source, line)
            if not emitter.emit(res.trace):  # emit() quarantined it already
                origins.discard(token)
                res.trace, res.reason = None, "the record could not be queued (see the quarantine)"
        else:
            emitter.reject(Kind.TRACE, raw, res.reason or "invalid", source=source, request_id=res.request_id,
                           line=line)
        yield res
