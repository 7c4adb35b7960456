"""The kinds of record the pipeline carries, and where each one is stored.

One table (DuckDB) or data stream (Elasticsearch) per kind. Each kind names its model, its id
field (the Elasticsearch ``_id``, so re-delivery overwrites instead of duplicating) and its time
field (retention, ``@timestamp``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from pydantic import BaseModel

from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import DecisionTrace

__all__ = ["KINDS", "Kind", "KindInfo", "kind_of"]


class Kind(IntEnum):
    """Record kind; the value is the byte stored in each spool frame."""

    TRACE = 1
    SNAPSHOT = 2
    PROBE = 3
    EVENT = 4
    FEEDBACK = 5
    QUARANTINE = 6
    # A trace written straight from the gateway's recorder, not validated on the request's path.
    # The storing sink validates it (ingest.codec.unchecked) and stores it as a TRACE, or refuses
    # it with pydantic's reason (quarantined). It has no table of its own, so it is not in KINDS.
    TRACE_UNCHECKED = 7
    POLICY = 8


@dataclass(frozen=True)
class KindInfo:
    """Storage facts of one kind."""

    kind: Kind
    name: str
    model: type[BaseModel]
    table: str
    id_field: str
    time_field: str


KINDS: dict[Kind, KindInfo] = {
    info.kind: info
    for info in (
        KindInfo(Kind.TRACE, "trace", DecisionTrace, "traces", "request_id", "ts"),
        KindInfo(Kind.SNAPSHOT, "snapshot", InstanceSnapshot, "instance_snapshots", "snapshot_id", "seen_at"),
        KindInfo(Kind.PROBE, "probe", ProbeResult, "probe_results", "probe_id", "ts"),
        KindInfo(Kind.EVENT, "event", RouterEvent, "router_events", "event_id", "ts"),
        KindInfo(Kind.FEEDBACK, "feedback", Feedback, "feedback", "feedback_id", "ts"),
        KindInfo(Kind.QUARANTINE, "quarantine", QuarantinedRecord, "quarantine", "quarantine_id", "ts"),
        KindInfo(Kind.POLICY, "policy", PolicyRecord, "policies", "policy_hash", "ts"),
    )
}

_BY_MODEL = {info.model: info.kind for info in KINDS.values()}


def kind_of(record: BaseModel) -> Kind:
    """Return the kind of a record.

    Raises:
        TypeError: For a model the pipeline does not store.
    """
    try:
        return _BY_MODEL[type(record)]
    except KeyError:
        raise TypeError(f"the trace pipeline does not store {type(record).__name__}") from None
