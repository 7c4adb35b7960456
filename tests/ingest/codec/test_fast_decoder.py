"""The C fast path decodes exactly what Arrow's JSON reader decodes, or declines (returns None)."""

import gc
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.json as pa_json
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.synthetic import TraceFactory
from ingest.codec import fast_decoder
from ingest.codec.encoder import Encoder
from ingest.codec.to_arrow import parse_schema
from ingest.kinds import KINDS, Kind

TS = pa.timestamp("us", tz="UTC")
ITEM = pa.struct([
    pa.field("name", pa.string()), pa.field("score", pa.float64()), pa.field("tags", pa.list_(pa.string())),
])
SCHEMA = pa.schema([
    pa.field("id", pa.string()),
    pa.field("n", pa.int64()),
    pa.field("x", pa.float64()),
    pa.field("ok", pa.bool_()),
    pa.field("at", TS),
    pa.field("inner", pa.struct([pa.field("a", pa.int64()), pa.field("when", TS), pa.field("items", pa.list_(ITEM))])),
    pa.field("items", pa.list_(ITEM)),
    pa.field("numbers", pa.list_(pa.float64())),
])


def arrow_read(schema: pa.Schema, payloads: list[bytes]) -> pa.Table:
    options = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    return pa_json.read_json(pa.BufferReader(b"\n".join(payloads)), parse_options=options)


def fast(schema: pa.Schema, payloads: list[bytes]) -> pa.Table | None:
    decoder = fast_decoder.decoder_for(schema)
    assert decoder is not None
    return decoder.decode(payloads)


def agrees(schema: pa.Schema, payloads: list[bytes]) -> pa.Table | None:
    """Assert the fast path returns Arrow's table or declines; return what it returned."""
    got = fast(schema, payloads)
    try:
        want = arrow_read(schema, payloads)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        assert got is None, [p.decode(errors="replace") for p in payloads]
        return None
    if got is not None:
        got.validate(full=True)
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
    return got


def test_the_extension_is_built() -> None:
    # `make install` compiles it; without it every batch silently takes the slow path.
    assert fast_decoder.AVAILABLE


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_stored_kind_has_a_fast_path(kind: Kind) -> None:
    assert fast_decoder.decoder_for(parse_schema(kind)) is not None


def test_encoded_traces_and_snapshots_decode_as_arrow_reads_them() -> None:
    enc = Encoder()
    records = [r for t in TraceFactory(seed=5, n_candidates=8, round_every=7).traces(300) for r in enc.encode(t)]
    for kind in (Kind.TRACE, Kind.SNAPSHOT):
        payloads = [p for k, p in records if k is kind]
        assert agrees(parse_schema(kind), payloads) is not None


# -- generated records ---------------------------------------------------------------------------
def _timestamp_text(dt: datetime, style: int) -> str:
    if style == 0:
        return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if style == 1:
        return dt.isoformat()  # offset, and the fraction only when not zero
    return dt.replace(tzinfo=None).isoformat(sep=" ", timespec="milliseconds")  # no zone: UTC


timestamps = st.builds(
    _timestamp_text,
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.sampled_from(
        [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))])),
    st.integers(0, 2),
) | st.sampled_from(["2026-11-01", "2026-11-01T10:00", "2026-02-30T00:00:00Z", "2026-11-01T00:00:00.1234567Z",
                     "2026-11-01T24:00:00Z", "2026-11-01T00:00:00+0100", "not a time", "2024-02-29T00:00:00Z"])
doubles = (st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(10**25), 10**25)
           | st.sampled_from([0.1 + 0.2, 5e-324, 1.7976931348623157e308, -0.0, 1e22, 1e23, 9007199254740993]))
int64s = st.integers(-(2**63), 2**63 - 1) | st.sampled_from([2**63, -(2**63) - 1, 1.0, 1e3])


def _maybe(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


def _record(schema_type: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_struct(schema_type):
        fields = {f.name: _maybe(_record(f.type)) for f in schema_type}
        return st.fixed_dictionaries({}, optional=fields)  # any field may be missing
    if pa.types.is_list(schema_type):
        return st.lists(_maybe(_record(schema_type.value_type)), max_size=4)
    if pa.types.is_timestamp(schema_type):
        return timestamps
    return {pa.string(): st.text(max_size=12), pa.int64(): int64s, pa.float64(): doubles,
            pa.bool_(): st.booleans()}[schema_type]


def _dumps(record: dict[str, Any], style: int) -> bytes:
    if style == 0:
        try:
            return orjson.dumps(record)  # what the encoder writes
        except TypeError:  # an integer beyond 64 bits
            return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    return json.dumps(record, ensure_ascii=style == 1).encode()  # \\u escapes (surrogate pairs), spaces


records = st.lists(st.tuples(_record(pa.struct(list(SCHEMA))), st.integers(0, 2)), min_size=1, max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records)
def test_generated_records_decode_as_arrow_reads_them_or_are_declined(batch: list[tuple[dict[str, Any], int]]) -> None:
    agrees(SCHEMA, [_dumps(record, style) for record, style in batch])


def test_common_records_take_the_fast_path() -> None:
    record = {"id": "r\u00e9q \"1\"\n", "n": -5, "x": 0.30000000000000004, "ok": True, "at": "2026-11-01T00:00:00Z",
              "inner": {"a": 1, "when": "2026-11-01T01:02:03.5+01:00",
                        "items": [{"name": "a", "score": 1, "tags": []}]},
              "items": [None, {"name": None, "score": -2.5e-7}], "numbers": [1, 2.5, 1e300]}
    for style in range(3):
        assert agrees(SCHEMA, [_dumps(record, style), b"{}"]) is not None


@pytest.mark.parametrize("payload", [
    b'{"id": "a", "unknown": 1}',  # Arrow refuses unknown fields
    b'{"id": "a", "id": "b"}',  # a repeated key
    b'{"n": "5"}', b'{"n": 1.0}', b'{"x": "1"}', b'{"ok": 1}', b'{"at": 0}', b'{"items": {}}', b'{"inner": []}',
    b'{"id": "\\ud800"}', b'{"id": "\xff"}', b'{"id": "\xed\xa0\x80"}', b'{"id": "a\x01"}',  # bad strings
    b'{"id": "a"} x', b'{"id": "a"', b"[]", b"", b"null", b'{"n": 01}', b'{"x": 1.}', b'{"x": .5}', b'{"x": -}',
    b'{"ok": tru}', b'{"ok": true false}', b'{"id": "a",}', b'{,}',
])
def test_what_the_fast_path_does_not_read_exactly_goes_to_arrow(payload: bytes) -> None:
    assert fast(SCHEMA, [b'{"id": "fine"}', payload]) is None
    agrees(SCHEMA, [b'{"id": "fine"}', payload])


def test_the_table_owns_its_memory() -> None:
    payloads = [orjson.dumps({"id": f"req-{i}", "items": [{"name": "x" * i, "tags": ["t"]}]}) for i in range(50)]
    table = fast(SCHEMA, payloads)
    assert table is not None
    del payloads
    gc.collect()
    fast(SCHEMA, [orjson.dumps({"id": "other" * 100})] * 200)  # reuses freed memory, if any was freed
    assert table.column("id").to_pylist() == [f"req-{i}" for i in range(50)]
    assert table.column("items").to_pylist()[3] == [{"name": "xxx", "score": None, "tags": ["t"]}]


@pytest.mark.parametrize("field", [
    pa.field("d", pa.date32()),
    pa.field("t", pa.timestamp("us")),  # naive: Arrow's reader decides what a zone means there
    pa.field("s", pa.struct([pa.field(f"f{i}", pa.int64()) for i in range(65)])),
])
def test_a_schema_it_cannot_read_has_no_decoder(field: pa.Field) -> None:
    assert fast_decoder.decoder_for(pa.schema([field])) is None
