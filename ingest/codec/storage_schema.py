"""Arrow schemas of what is stored, derived from the models in :mod:`schemas`.

A stored trace is the :class:`DecisionTrace` with two changes, both mechanical: each candidate's
``state`` (an :class:`InstanceSnapshot`, shared by many traces) is replaced by ``state_id``, a
content hash that points into ``instance_snapshots``, beside the two fields of the state that are
the decision's own, ``state_age_s`` and ``state_stale`` (its ``age_s`` and ``stale`` at the
decision: the snapshot is stored without them, so that one row serves every decision on that
state, whatever its age then); and a ``detail`` column says whether the candidate detail (states
and score terms) was kept or sampled out. Snapshots gain
``snapshot_id`` and ``seen_at``, when the state was observed (at a decision, the trace's ``ts``;
in a scrape round, the round's time, ``scraped_at + age_s``: not ``scraped_at``, which an
unreachable instance's rounds all share), feedback a ``feedback_id``. Nothing is typed by hand, so fields a
model gains appear here (and in the migrations) by themselves.
"""

from __future__ import annotations

import pyarrow as pa

from ingest.kinds import KINDS, Kind
from schemas.derive import arrow_schema

__all__ = ["STATE_FIELD", "TIMESTAMP", "storage_schema", "strip_not_null"]

TIMESTAMP = pa.timestamp("us", tz="UTC")
STATE_FIELD = "state"

_EXTRA_FIRST: dict[Kind, list[pa.Field]] = {
    Kind.SNAPSHOT: [
        pa.field("snapshot_id", pa.string(), nullable=False),
        pa.field("seen_at", TIMESTAMP, nullable=False),
    ],
    Kind.FEEDBACK: [pa.field("feedback_id", pa.string(), nullable=False)],
}
_EXTRA_LAST: dict[Kind, list[pa.Field]] = {Kind.TRACE: [pa.field("detail", pa.bool_(), nullable=False)]}


def _candidates_by_reference(field: pa.Field) -> pa.Field:
    item = field.type.value_type
    children: list[pa.Field] = []
    for child in (item.field(i) for i in range(item.num_fields)):
        children += [pa.field("state_id", pa.string()), pa.field("state_age_s", pa.float64()),
                     pa.field("state_stale", pa.bool_())] if child.name == STATE_FIELD else [child]
    return pa.field(field.name, pa.list_(pa.struct(children)), nullable=field.nullable)


def storage_schema(kind: Kind) -> pa.Schema:
    """Return the Arrow schema records of ``kind`` are stored with."""
    base = arrow_schema(KINDS[kind].model)
    fields = [_candidates_by_reference(f) if kind is Kind.TRACE and f.name == "candidates" else f for f in base]
    return pa.schema(_EXTRA_FIRST.get(kind, []) + fields + _EXTRA_LAST.get(kind, []))


def _nullable_type(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _nullable_type(f.type)) for f in dtype])
    if pa.types.is_list(dtype):
        return pa.list_(_nullable_type(dtype.value_type))
    return dtype


def strip_not_null(schema: pa.Schema) -> pa.Schema:
    """Return ``schema`` with every field nullable (what a table created from Arrow holds)."""
    return pa.schema([pa.field(f.name, _nullable_type(f.type)) for f in schema])
