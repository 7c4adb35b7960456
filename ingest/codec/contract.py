"""A model's contract checked on the Arrow columns the C decoder reads, instead of on Python objects.

The store checks every trace a gateway wrote unvalidated (:mod:`ingest.codec.unchecked`) with
pydantic, which builds two dozen models per trace to do it: about 22 µs a trace, a third of the
store process's busy CPU under load (``docs/benchmarks.md``). This module reads the same contract
from the model's core schema, the one pydantic itself runs, and checks it in two parts:

- what belongs to a value's place (a field that must be present, a value that may not be null) is
  flagged on the C decoder's schema nodes and checked as it reads (``_ndjson_arrow.c``);
- what belongs to the values (bounds, lengths, patterns, enum members, literals, the datetimes
  Python can hold and a datetime's own bounds) is checked on the decoded columns, a few vectorised
  calls per column for the whole batch;
- a datetime that must carry a zone (``tz_constraint: aware``, as ``schemas.common.UtcTime``) cannot
  be told from the column (the decoder reads a zone-less time as UTC): the payloads are searched
  once for a time the decoder would read without a zone (about 1.5 µs a 3 KB trace), and a batch
  holding one is left to pydantic.

A batch that passes both is valid as pydantic would find it. One that does not is checked by
pydantic, trace by trace, for its reasons. The check may refuse what pydantic accepts (``"1"``
for an int, which pydantic's lax mode takes; a key written twice): pydantic then decides. It never
accepts what pydantic refuses (``tests/ingest/codec/test_contract.py`` changes valid traces field
by field and compares the two). A model with anything this cannot express (a validator function,
a union, a type not listed below) gets no contract (:func:`contract_for` returns None), and pydantic
checks all of its records, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from ingest.codec import fast_decoder

__all__ = ["Contract", "contract_for"]

Test = Callable[[pa.Array], bool]
# Python's datetimes span years 1-9999 in their own zone; a day inside either end in UTC is certain.
_EARLIEST = int((datetime(1, 1, 2, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
_LATEST = int((datetime(9999, 12, 30, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# A time the C decoder reads (``YYYY-MM-DD[T ]hh:mm:ss[.f{1,6}]`` then a zone or not) that ends with
# no zone: its string closes right after the seconds. Found anywhere (in any string), the batch goes
# to pydantic; the search starts at the date's last '-' (a literal: Python's re scans for it fast).
_ZONELESS = re.compile(rb'-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,6})?"')


class _Unsupported(Exception):
    """The core schema holds something the contract cannot express."""


@dataclass(frozen=True, slots=True)
class _Check:
    """The tests of one node's values, and of its children's (struct: field index; list: 0)."""

    tests: tuple[Test, ...] = ()
    children: tuple[tuple[int, _Check], ...] = ()
    is_list: bool = False

    @property
    def empty(self) -> bool:
        return not self.tests and not self.children


def _passes(check: _Check, values: pa.Array) -> bool:
    if values.null_count == len(values):  # nothing to test here, nor below (a null's children are null)
        return True
    if not all(test(values) for test in check.tests):
        return False
    if check.is_list:
        return _passes(check.children[0][1], values.flatten())
    return all(_passes(child, values.field(i)) for i, child in check.children)


class Contract:
    """The contract of one model's stored form (see :func:`contract_for`)."""

    def __init__(self, schema: pa.Schema, spec: fast_decoder.Spec, check: _Check, *, zoned: bool = False) -> None:
        self._decoder = fast_decoder.Decoder(schema, spec)
        self._check = check
        self._zoned = zoned

    def checked(self, payloads: list[bytes]) -> pa.Table | None:
        """The payloads as a table when every one meets the contract; None when one does not (or may not)."""
        if self._zoned and _ZONELESS.search(b"\n".join(payloads)):  # a time without a zone, maybe a datetime's
            return None
        return self._decoder.decode(payloads, check=self.holds)

    def holds(self, table: pa.Table) -> bool:
        """Whether every value of ``table`` (one chunk per column) meets the contract's value tests."""
        return all(_passes(child, table.column(i).chunk(0)) for i, child in self._check.children)


@cache
def contract_for(model: type[BaseModel], schema: pa.Schema) -> Contract | None:
    """The contract of ``model`` over records of ``schema`` (its stored form, every field nullable).

    None when the C decoder is not built, or the model holds a check this cannot express.
    """
    if not fast_decoder.AVAILABLE:
        return None
    try:
        spec, check = _model(pa.struct(list(schema)), model.__pydantic_core_schema__, "", 0)
    except _Unsupported:
        return None
    return Contract(schema, spec, check, zoned=_wants_zones(model.__pydantic_core_schema__))


def _wants_zones(core: Any) -> bool:
    """Whether a datetime anywhere in ``core`` must carry a zone."""
    if isinstance(core, Mapping):
        if core.get("type") == "datetime" and core.get("tz_constraint") is not None:
            return True
        return any(_wants_zones(v) for v in core.values())
    if isinstance(core, (list, tuple)):
        return any(_wants_zones(v) for v in core)
    return False


def _only(core: Mapping[str, Any], allowed: set[str]) -> None:
    extra = set(core) - allowed - {"type", "metadata", "ref", "serialization"}  # serialization: not checked
    if extra:
        raise _Unsupported(f"{core['type']}: {sorted(extra)}")


def _model(dtype: pa.DataType, core: Mapping[str, Any], name: str, flags: int) -> tuple[fast_decoder.Spec, _Check]:
    """A model as a struct: each stored field flagged (required, not null) and its values' tests."""
    _only(core, {"cls", "schema", "custom_init", "root_model", "config"})
    if core.get("custom_init") or core.get("root_model") or (core.get("config") or {}).get("strict") \
            or _code(dtype) != fast_decoder.STRUCT:
        raise _Unsupported("model")  # strict: pydantic's own rules of its types, not the lax ones tested here
    inner = core["schema"]
    if inner["type"] != "model-fields":
        raise _Unsupported(inner["type"])
    _only(inner, {"fields", "model_name", "computed_fields"})
    fields: Mapping[str, Any] = inner["fields"]
    names = {f.name for f in dtype}
    if any(_field(f)[1] for n, f in fields.items() if n not in names):
        raise _Unsupported("a required field is not stored")  # a field the decoder never sees
    specs, checks = [], []
    for i, stored in enumerate(dtype):
        if stored.name not in fields:
            raise _Unsupported(f"{stored.name} is not a field")
        inner_core, required, nullable = _field(fields[stored.name])
        field_flags = (fast_decoder.REQUIRED if required else 0) | (0 if nullable else fast_decoder.NOT_NULL)
        spec, check = _value(stored.type, inner_core, stored.name, field_flags)
        specs.append(spec)
        if not check.empty:
            checks.append((i, check))
    return (fast_decoder.STRUCT, name.encode(), tuple(specs), flags), _Check(children=tuple(checks))


def _field(field: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool, bool]:
    """A model field's value schema, whether it is required, whether it may be null."""
    if field["type"] != "model-field":
        raise _Unsupported(field["type"])
    _only(field, {"schema", "serialization_exclude", "serialization_alias", "frozen"})
    core, required, nullable = field["schema"], True, False
    if core["type"] == "default":
        _only(core, {"schema", "default"})
        core, required = core["schema"], False
    if core["type"] == "nullable":
        _only(core, {"schema"})
        core, nullable = core["schema"], True
    return core, required, nullable


def _value(dtype: pa.DataType, core: Mapping[str, Any], name: str, flags: int) -> tuple[fast_decoder.Spec, _Check]:
    kind = core["type"]
    if kind == "model":
        return _model(dtype, core, name, flags)
    if kind == "list":
        _only(core, {"items_schema"})
        if _code(dtype) != fast_decoder.LIST:
            raise _Unsupported("list")
        item = core["items_schema"]
        item_flags = fast_decoder.NOT_NULL
        if item["type"] == "nullable":
            _only(item, {"schema"})
            item, item_flags = item["schema"], 0
        spec, check = _value(dtype.value_type, item, "item", item_flags)
        return (fast_decoder.LIST, name.encode(), (spec,), flags), \
            _Check(children=() if check.empty else ((0, check),), is_list=True)
    code, tests = _leaf(dtype, core)
    return (code, name.encode(), (), flags), _Check(tests=tests)


def _code(dtype: pa.DataType) -> int:
    try:
        return fast_decoder.code_of(dtype)
    except TypeError as exc:
        raise _Unsupported(str(exc)) from exc


# What each scalar kind of the core schema must be stored as (one decoder node type each).
_STORED_AS = {"str": fast_decoder.STRING, "enum": fast_decoder.STRING, "literal": fast_decoder.STRING,
              "int": fast_decoder.INT64, "float": fast_decoder.DOUBLE, "bool": fast_decoder.BOOL,
              "datetime": fast_decoder.TIMESTAMP}


def _leaf(dtype: pa.DataType, core: Mapping[str, Any]) -> tuple[int, tuple[Test, ...]]:
    """The decoder's code for a scalar, and the tests of its values."""
    kind, code = core["type"], _code(dtype)
    if _STORED_AS.get(kind) != code:
        raise _Unsupported(f"{kind} stored as {dtype}")
    if kind == "str":
        _only(core, {"pattern", "min_length", "max_length"})
        tests: list[Test] = []
        if "min_length" in core or "max_length" in core:
            tests.append(_lengths(core.get("min_length"), core.get("max_length")))
        if "pattern" in core:
            tests.append(_pattern(core["pattern"]))
        return code, tuple(tests)
    if kind in ("int", "float"):
        _only(core, {"ge", "gt", "le", "lt"} | ({"allow_inf_nan"} if kind == "float" else set()))
        bounds = {k: core[k] for k in ("ge", "gt", "le", "lt") if k in core}
        return code, (_bounds(**bounds),) if bounds else ()
    if kind == "bool":
        _only(core, set())
        return code, ()
    if kind == "datetime":
        _only(core, {"microseconds_precision", "tz_constraint", "ge", "gt", "le", "lt"})
        if core.get("tz_constraint", "aware") != "aware":  # naive only, or one offset: not readable from UTC
            raise _Unsupported(f"datetime tz_constraint {core['tz_constraint']!r}")
        return code, (_instants_within(**{k: _micros(core[k]) for k in ("ge", "gt", "le", "lt") if k in core}),)
    if kind == "enum" and core.get("sub_type") == "str":
        _only(core, {"cls", "members", "sub_type"})
        return code, (_member_of([m.value for m in core["members"]]),)
    if kind == "literal" and all(type(v) is str for v in core["expected"]):
        _only(core, {"expected"})
        return code, (_member_of(core["expected"]),)
    raise _Unsupported(f"{kind}: {sorted(core)}")


# -- the value tests: each passes an array whose non-null values all meet it (nulls are the flags' business)


def _bounds(ge: float | None = None, gt: float | None = None, le: float | None = None,
            lt: float | None = None) -> Test:
    def test(values: pa.Array) -> bool:
        low_high = pc.min_max(values)
        low, high = low_high["min"].as_py(), low_high["max"].as_py()
        if low is None:  # no values
            return True
        return ((ge is None or low >= ge) and (gt is None or low > gt) and (le is None or high <= le)
                and (lt is None or high < lt))
    return test


def _lengths(shortest: int | None, longest: int | None) -> Test:
    bounds = _bounds(ge=shortest, le=longest)
    return lambda values: bounds(pc.utf8_length(values))  # code points, as pydantic counts


def _pattern(pattern: str) -> Test:
    """A search with RE2, which reads pydantic's patterns (Rust's regex) alike, or more strictly (an ASCII digit)."""
    try:
        pc.match_substring_regex(pa.array([], pa.string()), pattern)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Unsupported(f"pattern {pattern!r}") from exc
    return lambda values: pc.all(pc.match_substring_regex(values, pattern)).as_py() is not False


def _member_of(allowed: Sequence[str]) -> Test:
    value_set = pa.array(list(allowed), pa.string())
    return lambda values: pc.all(pc.is_in(pc.drop_null(values), value_set=value_set)).as_py() is not False


def _instants_within(ge: int | None = None, gt: int | None = None, le: int | None = None,
                     lt: int | None = None) -> Test:
    """Instants inside the years a Python datetime can hold, and inside the bounds (microseconds since the epoch)."""
    lows = [_EARLIEST] + ([] if ge is None else [ge]) + ([] if gt is None else [gt + 1])  # integers: > x is >= x+1
    highs = [_LATEST] + ([] if le is None else [le]) + ([] if lt is None else [lt - 1])
    within = _bounds(ge=max(lows), le=min(highs))
    return lambda values: within(values.cast(pa.int64()))


def _micros(bound: Any) -> int:
    """A datetime bound as microseconds since the epoch, as the stored column holds it."""
    if not isinstance(bound, datetime) or bound.utcoffset() is None:
        raise _Unsupported(f"datetime bound {bound!r}")  # a naive bound compares in pydantic's own way
    return (bound - _EPOCH) // timedelta(microseconds=1)
