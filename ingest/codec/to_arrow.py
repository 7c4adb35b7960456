"""Serialized records to Arrow tables, outside the GIL.

A batch is decoded in one call: by the fast path of :mod:`ingest.codec.fast_decoder` when every record is
in the form our encoder writes, else by Arrow's JSON reader. When that fails too, each record is
parsed alone so that only the records Arrow cannot hold are refused, with Arrow's message as the
reason.
"""

from __future__ import annotations

import threading
from functools import cache

import pyarrow as pa
import pyarrow.json as pa_json

from ingest.codec import fast_decoder
from ingest.codec.storage_schema import storage_schema, strip_not_null
from ingest.kinds import Kind
from ingest.record_sink import Rejected

__all__ = ["parse_payloads", "parse_schema"]


@cache
def parse_schema(kind: Kind) -> pa.Schema:
    """Return the (all-nullable) schema records of ``kind`` are parsed with."""
    return strip_not_null(storage_schema(kind))


@cache
def _options(kind: Kind) -> pa_json.ParseOptions:
    return pa_json.ParseOptions(explicit_schema=parse_schema(kind), unexpected_field_behavior="error")


@cache
def _decoder(kind: Kind) -> fast_decoder.Decoder | None:
    return fast_decoder.decoder_for(parse_schema(kind))


_BLOCK = 8 << 20
_scratch = threading.local()
# Parsed tables come from glibc's allocator, not Arrow's default (mimalloc): mimalloc hands each
# batch's memory back to the kernel and faults it in again for the next, which cost the parsing
# thread about 2 µs of kernel time per trace (bench: 150,000 traces, 8 candidates each).
_POOL = pa.system_memory_pool()


def _ndjson(payloads: list[bytes]) -> memoryview:
    """Return the payloads as NDJSON in this thread's reused buffer.

    A fresh buffer per batch (joining into new bytes) costs a page fault per 4 KB on first
    touch, a tenth of the parsing time on a small VM. The parsed table copies what it keeps, so the
    buffer is free again as soon as :func:`_read` returns.
    """
    total = sum(map(len, payloads)) + len(payloads)
    buf: bytearray | None = getattr(_scratch, "buf", None)
    if buf is None or len(buf) < total:
        buf = _scratch.buf = bytearray(max(total, 2 * len(buf or b"")))
    view = memoryview(buf)
    pos = 0
    for payload in payloads:
        end = pos + len(payload)
        view[pos:end] = payload
        buf[end] = 10  # "\n"
        pos = end + 1
    return view[:pos]


def _read(kind: Kind, payloads: list[bytes]) -> pa.Table:
    decoder = _decoder(kind)
    table = decoder.decode(payloads) if decoder is not None else None
    return table if table is not None else _read_with_arrow(kind, payloads)


def _read_with_arrow(kind: Kind, payloads: list[bytes]) -> pa.Table:
    data = pa.py_buffer(_ndjson(payloads))
    # On the calling thread: the pipeline already overlaps parsing with writing, and on a small
    # machine Arrow's extra threads would only take the CPU from the request path. Blocks of a
    # few MB stay in the CPU caches (a third less CPU than one block per batch); a block must
    # hold the longest record whole.
    block = max(_BLOCK, 2 * max(map(len, payloads)) + 1)
    options = pa_json.ReadOptions(block_size=min(block, data.size + 1), use_threads=False)
    table = pa_json.read_json(pa.BufferReader(data), read_options=options, parse_options=_options(kind),
                              memory_pool=_POOL)
    schema = parse_schema(kind)
    return table if table.schema.equals(schema) else table.select(schema.names).cast(schema)


def parse_payloads(kind: Kind, payloads: list[bytes]) -> tuple[pa.Table | None, list[Rejected]]:
    """Parse ``payloads`` of one kind; return the table of the good ones and the refused ones."""
    try:
        return _read(kind, payloads), []
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    good, bad = [], []
    for payload in payloads:
        try:
            good.append(_read(kind, [payload]))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            bad.append(Rejected(kind, payload, f"cannot be stored: {exc}"))
    return (pa.concat_tables(good) if good else None), bad
