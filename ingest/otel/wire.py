"""Plain spans to the OTLP protobuf body (``ExportTraceServiceRequest``), written directly.

The SDK's encoder builds a protobuf object per attribute through a chain of Python calls: about
90 µs of CPU per exported request on a quiet machine, more than the 10% of the gateway's own CPU
per request that export may cost. A request's attributes mostly repeat from one request to the
next (keys always; models, instances, rules, kinds, statuses usually; a step's event entirely), so
each encoded key-value and each event's name and attributes (by the attribute dict, which the span
builder shares between equal steps and never changes) are kept in bounded caches, and most of a
span is joined from bytes already made.
``tests/ingest/otel/test_wire.py`` holds the result equal, message for message, to the SDK's
encoding of the same spans as ``ReadableSpan`` objects (:func:`ingest.otel.spans.to_readable`).

That is the reference, and the fallback where the C extension ``ingest.otel._otlp_wire`` is not
built (no C compiler at install: ``setup.py``); :func:`encode_request` is the extension's, which
writes the same bytes for the same spans (held equal by the same test) in about a tenth of the
CPU: even with the caches the exporter's thread spent half its time here. Both raise the same
errors for what cannot be encoded: TypeError (a value of another type), OverflowError (an int
outside int64, a time outside uint64), ValueError (an id that is not hex of its length).

Wire format: https://protobuf.dev/programming-guides/encoding/; the messages of
``opentelemetry/proto/trace/v1/trace.proto`` (span flags as the SDK sets them: the parent's
remoteness is known).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ingest.otel.spans import PlainEvent, PlainSpan

__all__ = ["FAST", "EncodeTraces", "encode_request", "encode_request_py", "encode_traces"]

_CACHE_MAX = 65_536
_EVENTS_MAX = 16_384
_kv_cache: dict[tuple[int, str, type, Any], bytes] = {}  # (tag, key, type, value) -> the whole field
# id of an event's attribute dict -> (that dict, the event's name, the encoded name and attributes). The entry
# holds the dict, so the id cannot be reused while it is cached; the builder shares one dict per distinct step.
_event_cache: dict[int, tuple[Mapping[str, Any], str, bytes]] = {}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_pack_q = struct.Struct("<Q").pack
_pack_d = struct.Struct("<d").pack
_pack_i = struct.Struct("<I").pack


_SMALL = tuple(bytes((i,)) for i in range(128))  # one-byte varints (short lengths, tags)
_INT64 = range(-(1 << 63), 1 << 63)
_UINT64 = range(1 << 64)


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _SMALL[n]
    if n < 0:
        n += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field (``tag`` is the field's first byte, wire type 2)."""
    n = len(payload)
    return _SMALL[tag] + _SMALL[n] + payload if n < 0x80 and tag < 0x80 else bytes((tag,)) + _varint(n) + payload


def _any(value: Any) -> bytes:
    """An ``AnyValue``."""
    if isinstance(value, str):
        return _field(0x0A, value.encode())
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        if value not in _INT64:
            raise OverflowError("an attribute's int is outside int64")
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _pack_d(value)
    if isinstance(value, list | tuple):
        return _field(0x2A, b"".join(_field(0x0A, _any(v)) for v in value))  # ArrayValue.values
    raise TypeError(f"attribute value of type {type(value).__name__}")


def _kv_field(tag: int, key: str, value: Any, token: tuple[int, str, type, Any]) -> bytes:
    """One ``KeyValue`` as field ``tag`` of its parent, made and kept in the cache."""
    found = _field(tag, _field(0x0A, key.encode()) + _field(0x12, _any(value)))
    if len(_kv_cache) >= _CACHE_MAX:
        _kv_cache.clear()
    _kv_cache[token] = found
    return found


def _attributes(tag: int, attrs: Mapping[str, Any]) -> bytes:
    cache = _kv_cache
    out = []
    for key, value in attrs.items():
        cls = value.__class__
        if cls is float:  # measurements seldom repeat: not worth a cache entry
            out.append(_field(tag, _field(0x0A, key.encode()) + _field(0x12, b"\x21" + _pack_d(value))))
            continue
        token = (tag, key, cls, tuple(value) if cls is list else value)
        try:
            found = cache.get(token)
        except TypeError:  # an array of arrays: not kept
            out.append(_field(tag, _field(0x0A, key.encode()) + _field(0x12, _any(value))))
            continue
        out.append(_kv_field(tag, key, value, token) if found is None else found)
    return b"".join(out)


def _event(event: PlainEvent) -> bytes:
    """One ``Span.Event`` as a field of its span."""
    attrs = event.attributes
    hit = _event_cache.get(id(attrs)) if event.shared else None
    if hit is not None and hit[0] is attrs and hit[1] == event.name:
        body = hit[2]
    else:
        body = _field(0x12, _text(event.name)) + _attributes(0x1A, attrs)
        if event.shared:  # one-off attribute dicts are not kept
            if len(_event_cache) >= _EVENTS_MAX:
                _event_cache.clear()
            _event_cache[id(attrs)] = (attrs, event.name, body)
    return _field(0x5A, b"\x09" + _time(event.time_ns) + body)


def _text(s: str) -> bytes:
    """A name's or a message's UTF-8 (TypeError for another type, as the C encoder)."""
    if not isinstance(s, str):
        raise TypeError(f"expected a str, not {type(s).__name__}")
    return s.encode()


def _time(ns: int) -> bytes:
    """A fixed64 time (OverflowError outside uint64, as the C encoder)."""
    if not isinstance(ns, int):
        raise TypeError(f"a time must be an int, not {type(ns).__name__}")
    if ns not in _UINT64:
        raise OverflowError("a time outside uint64")
    return _pack_q(ns)


def _id(hex_id: str, size: int) -> bytes:
    if len(hex_id) != 2 * size:
        raise ValueError(f"an id of {size} bytes is {2 * size} hex digits, not {len(hex_id)}")
    return bytes.fromhex(hex_id)


def _span(span: PlainSpan) -> bytes:
    parts = [b"\x0a\x10", _id(span.trace_id, 16), b"\x12\x08", _id(span.span_id, 8)]
    if span.trace_state is not None and (state := _text(span.trace_state)):  # as received; empty: none
        parts.append(_field(0x1A, state))
    if span.parent_id is not None:
        parts += (b"\x22\x08", _id(span.parent_id, 8))
    parts += (_field(0x2A, _text(span.name)), b"\x30", _varint(span.kind.value + 1),
              b"\x39", _time(span.start_ns), b"\x41", _time(span.end_ns), _attributes(0x4A, span.attributes))
    parts += map(_event, span.events)
    status = b"" if span.error is None else (_field(0x12, _text(span.error)) if span.error else b"") + b"\x18\x02"
    parts.append(_field(0x7A, status))
    flags = _HAS_IS_REMOTE | (_IS_REMOTE if span.parent_id is not None and span.parent_remote else 0)
    parts += (b"\x85\x01", _pack_i(flags))
    return b"".join(parts)


def encode_request_py(resource: Mapping[str, Any], scope: tuple[str, str | None], spans: Sequence[PlainSpan],
                      ) -> bytes:
    """The ``ExportTraceServiceRequest`` of ``spans``, all of one resource and one instrumentation scope."""
    name, version = scope
    scope_msg = _field(0x0A, name.encode()) + (_field(0x12, version.encode()) if version else b"")
    scope_spans = _field(0x0A, scope_msg) + b"".join(_field(0x12, _span(s)) for s in spans)
    resource_spans = _field(0x0A, _attributes(0x0A, resource)) + _field(0x12, scope_spans)
    return _field(0x0A, resource_spans)


# (resource, scope, traces, builder) -> (body, spans, rejected: [(index, exception)], dropped)
EncodeTraces = Callable[[Mapping[str, Any], tuple[str, str | None], list[Any], Any],
                        tuple[bytes, int, list[tuple[int, Exception]], int]]
encode_request: Callable[[Mapping[str, Any], tuple[str, str | None], Sequence[PlainSpan]], bytes]
encode_traces: EncodeTraces | None  # stored traces straight to spans (ingest/otel/_otlp_traces.c); None: not built
try:
    from ingest.otel._otlp_wire import encode_request, encode_traces
except ImportError:  # not built (no C compiler): the same bytes, ten times the CPU
    encode_request, encode_traces = encode_request_py, None
FAST = encode_request is not encode_request_py
