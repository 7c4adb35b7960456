"""The fast path of :mod:`ingest.codec.to_arrow`: our own JSON records into Arrow, without Arrow's reader.

Every record in the spool was written by :class:`ingest.codec.encoder.Encoder`, so a batch holds JSON
objects of one known shape. The C decoder ``ingest.codec._ndjson_arrow`` reads them against the storage
schema straight into Arrow's buffers, outside the GIL: 3-4 µs of CPU for a 3.7 KB trace, against
14.5 µs for Arrow's JSON reader, which first tokenises everything into strings and then converts
each column. This module hands it the schema and assembles its buffers into a table with
``Array.from_buffers``; the buffers' memory is handed over, not copied.

The decoder accepts less than Arrow's reader, never more. When a batch holds anything else, an
unknown field, a type mismatch, a number or timestamp in a form it does not read, :meth:`Decoder.decode`
returns None and the caller parses the batch with Arrow's reader, which also names what it refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType

import pyarrow as pa

_c: ModuleType | None
try:
    from ingest.codec import _ndjson_arrow as _c
except ImportError:  # not built (no C compiler): Arrow's reader does all the work
    _c = None

__all__ = ["AVAILABLE", "Decoder", "code_of", "decoder_for"]

AVAILABLE = _c is not None
CHUNK_ROWS = 2048
MAX_FIELDS = _c.MAX_FIELDS if _c is not None else 0  # of one struct
# A schema node: (type, name, children[, flags]); the flags are ingest.codec.contract's.
Spec = tuple[int, bytes, tuple["Spec", ...]] | tuple[int, bytes, tuple["Spec", ...], int]
BOOL, INT64, DOUBLE, STRING, TIMESTAMP, STRUCT, LIST = (
    (_c.BOOL, _c.INT64, _c.DOUBLE, _c.STRING, _c.TIMESTAMP, _c.STRUCT, _c.LIST) if _c is not None else range(7))
REQUIRED, NOT_NULL = (_c.REQUIRED, _c.NOT_NULL) if _c is not None else (1, 2)  # its key must be there; not null
_Buffer = tuple[int, int, object]  # address, size, the owner that frees it
_Node = tuple[int, int, _Buffer | None, _Buffer | None, _Buffer | None]


def code_of(dtype: pa.DataType) -> int:
    """The decoder's node type for ``dtype``.

    Raises:
        TypeError: The fast path cannot decode it (or a struct has more than MAX_FIELDS fields).
    """
    if pa.types.is_struct(dtype):
        if dtype.num_fields > MAX_FIELDS:
            raise TypeError(f"the fast path reads structs of {MAX_FIELDS} fields at most")
        return STRUCT
    if pa.types.is_list(dtype):
        return LIST
    if pa.types.is_timestamp(dtype) and dtype.unit == "us" and dtype.tz == "UTC":
        return TIMESTAMP
    codes = {pa.bool_(): BOOL, pa.int64(): INT64, pa.float64(): DOUBLE, pa.string(): STRING}
    if dtype not in codes:
        raise TypeError(f"the fast path cannot decode {dtype}")
    return codes[dtype]


def _node(name: str, dtype: pa.DataType) -> Spec:
    assert _c is not None
    code = code_of(dtype)
    if code == STRUCT:
        return code, name.encode(), tuple(_node(f.name, f.type) for f in dtype)
    if code == LIST:
        return code, name.encode(), (_node("item", dtype.value_type),)
    return code, name.encode(), ()


class Decoder:
    """Decodes records of one schema (see :func:`decoder_for`)."""

    def __init__(self, schema: pa.Schema, spec: Spec) -> None:
        self.schema = schema
        self._spec = spec

    def decode(self, payloads: list[bytes], check: Callable[[pa.Table], bool] | None = None) -> pa.Table | None:
        """Return ``payloads`` (JSON objects) as a table; None when one is beyond the fast path.

        ``check``: given the table whole (one chunk a column) before it is cut; False makes it None.
        """
        assert _c is not None
        nodes = _c.decode(self._spec, payloads)
        if nodes is None:
            return None
        it = iter(nodes)
        next(it)  # the record itself: never null
        table = pa.Table.from_arrays([_array(f.type, it) for f in self.schema], schema=self.schema)
        if check is not None and not check(table):
            return None
        # In slices (no copy): DuckDB scans an Arrow table's batches in parallel, and a batch of
        # 32,768 traces in one piece inserted 15% slower than the same rows as Arrow's reader cuts them.
        return pa.Table.from_batches(table.to_batches(max_chunksize=CHUNK_ROWS), schema=self.schema)


def decoder_for(schema: pa.Schema) -> Decoder | None:
    """Return the fast decoder of records of ``schema`` (None: it cannot read them, or is not built)."""
    if _c is None:
        return None
    try:
        return Decoder(schema, _node("", pa.struct(list(schema))))
    except TypeError:
        return None


def _buffer(raw: _Buffer | None) -> pa.Buffer | None:
    return None if raw is None else pa.foreign_buffer(raw[0], raw[1], base=raw[2])


def _array(dtype: pa.DataType, nodes: Iterator[_Node]) -> pa.Array:
    length, nulls, valid, offsets, values = next(nodes)
    validity = _buffer(valid)
    if pa.types.is_struct(dtype):
        children = [_array(f.type, nodes) for f in dtype]
        return pa.Array.from_buffers(dtype, length, [validity], nulls, children=children)
    if pa.types.is_list(dtype):
        child = _array(dtype.value_type, nodes)
        return pa.Array.from_buffers(dtype, length, [validity, _buffer(offsets)], nulls, children=[child])
    if offsets is not None:  # strings
        return pa.Array.from_buffers(dtype, length, [validity, _buffer(offsets), _buffer(values)], nulls)
    return pa.Array.from_buffers(dtype, length, [validity, _buffer(values)], nulls)
