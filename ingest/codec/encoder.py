"""Records to the bytes that the spool frames and the sinks parse (JSON, one object per record).

Traces are the hot path (``emit`` runs on the request path), so they are not serialized through
``model_dump_json``: orjson walks the frozen models' ``__dict__`` directly, which is about twice
as fast and gives the same JSON values (``tests/ingest/codec/test_encoder.py`` checks the round trip).
Each candidate's state is written once as a snapshot record and referenced by its content hash;
its ``age_s`` and ``stale``, the decision's own (the router stamps a copy of the scraped state per
tenth of a second of age), stay in the candidate (``state_age_s``, ``state_stale``), and the
snapshot is written without them: one row for every decision on that state, not one per tenth of
a second (at 200 instances, 111 new snapshot rows a request; about 3 a request with four).
Traces outside the detail sample keep their candidates without states and score terms.

A snapshot row's ``seen_at`` is when that state was observed: a candidate's state, at its
decision (the trace's ``ts``); a scrape round's snapshot, at the round (:func:`observed_at`: its
scrape plus its age then). Not its ``scraped_at``: while an instance is unreachable every round
and decision keeps its last good scrape, with a growing age and moving latches, and rows that
all carried that one time could not be told apart or put in order.
"""

from __future__ import annotations

import hashlib
import operator
import zlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import BaseModel

from ingest.kinds import Kind, kind_of
from ingest.record_sink import RecordBatch, batch_of
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.trace import DecisionTrace

__all__ = ["Encoder", "content_id", "dumps", "encode_batch", "feedback_id", "is_detailed", "observed_at"]

_CACHE_MAX = 4096


# Traces: the fields of each nested model, straight from C (a Python ``default`` called for each of
# a trace's twenty-odd models was half the encoding time). A validated trace holds only models,
# enums, datetimes and plain values (no model in it has an untyped field: tests/ingest/codec/test_encoder.py
# checks), so nothing else with a ``__dict__`` can reach it.
_fields_of = operator.attrgetter("__dict__")
_IS_MODEL: dict[type, bool] = {}  # class -> is it a model (asked once per class, not per object)


def _plain(obj: Any) -> Any:
    cls = obj.__class__
    is_model = _IS_MODEL.get(cls)
    if is_model is None:
        is_model = _IS_MODEL[cls] = issubclass(cls, BaseModel)
    if is_model:
        return obj.__dict__
    raise TypeError(f"cannot serialize {cls.__name__}")


def dumps(record: BaseModel) -> bytes:
    """Return the JSON of any contract model (same values as ``model_dump_json``)."""
    return orjson.dumps(record, default=_plain, option=orjson.OPT_UTC_Z)


def content_id(payload: bytes) -> str:
    """Return a short, stable id of some content (BLAKE2b, 96 bits, hex)."""
    return hashlib.blake2b(payload, digest_size=12).hexdigest()


def feedback_id(item: Feedback) -> str:
    """Return the id of a feedback record: the same verdict sent twice is stored once."""
    return content_id(f"{item.request_id}\x00{item.ts.isoformat()}\x00{item.source}".encode())


def observed_at(snap: InstanceSnapshot) -> datetime | None:
    """When a scrape round's snapshot was taken: its ``scraped_at`` plus its ``age_s`` (None: never scraped).

    The round computes ``age_s`` from the gateway's wall clock at its tick, so the sum is that
    tick's time, the same wherever and whenever the record is encoded (a relayed or imported
    record too); without an age, the scrape's own time.
    """
    if snap.scraped_at is None or snap.age_s is None:
        return snap.scraped_at
    return snap.scraped_at + timedelta(seconds=snap.age_s)


def is_detailed(request_id: str, share: float) -> bool:
    """Decide, the same way every time for the same id, whether a trace keeps full detail."""
    if share >= 1.0:
        return True
    if share <= 0.0:
        return False
    return zlib.crc32(request_id.encode()) % 100_000 < share * 100_000


class Encoder:
    """Turns records into ``(kind, payload)`` pairs; not thread-safe (the emitter holds a lock).

    Args:
        detail_share: Share of traces that keep candidate states and score terms.
        clock: UTC wall clock, for a snapshot emitted on its own before any scrape succeeded.
    """

    def __init__(
        self, detail_share: float = 1.0, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self.detail_share = detail_share
        self._clock = clock
        self._by_object: dict[int, tuple[InstanceSnapshot, str]] = {}
        self._written: dict[str, None] = {}
        self._out: list[tuple[Kind, bytes]] = []
        self._seen_at: datetime | None = None

    def encode(self, record: BaseModel) -> list[tuple[Kind, bytes]]:
        """Return the payloads of ``record``: new snapshots first, then the record itself."""
        kind = kind_of(record)
        if kind is Kind.TRACE:
            assert isinstance(record, DecisionTrace)
            return self._trace(record)
        if kind is Kind.FEEDBACK:
            assert isinstance(record, Feedback)
            return [(kind, _with(dumps(record), b'"feedback_id":' + orjson.dumps(feedback_id(record))))]
        if kind is Kind.SNAPSHOT:
            assert isinstance(record, InstanceSnapshot)
            self._seen_at = observed_at(record)
            self._out = []
            self._state_id(record)
            return self._out
        return [(kind, dumps(record))]

    def _trace(self, trace: DecisionTrace) -> list[tuple[Kind, bytes]]:
        return self._trace_of(trace.__dict__, [cand.__dict__ for cand in trace.candidates], Kind.TRACE)

    def plain_trace(self, values: dict[str, Any]) -> list[tuple[Kind, bytes]]:
        """Return the payloads of a trace given as plain values (:meth:`TraceRecorder.plain`).

        The same bytes as :meth:`encode` gives for the validated trace, but the record's kind is
        ``TRACE_UNCHECKED``: the storing sink validates it (:mod:`ingest.codec.unchecked`).
        """
        return self._trace_of(values, values["candidates"], Kind.TRACE_UNCHECKED)

    def _trace_of(self, fields: dict[str, Any], candidates: Sequence[dict[str, Any]],
                  kind: Kind) -> list[tuple[Kind, bytes]]:
        self._out = []
        self._seen_at = fields["ts"]
        detail = is_detailed(fields["request_id"], self.detail_share)
        cands = []
        for cand in candidates:  # each state becomes its snapshot's id (one loop: the hot path)
            out = cand.copy()
            state = out.pop("state", None)
            if detail and state is not None:
                out["state_id"], out["state_age_s"], out["state_stale"] = self._decided_state(state)
            else:
                out["state_id"] = None
                if not detail:
                    out["score_terms"] = []
            cands.append(out)
        body = fields.copy()
        body["candidates"], body["detail"] = cands, detail
        try:
            self._out.append((kind, orjson.dumps(body, default=_fields_of, option=orjson.OPT_UTC_Z)))
        except TypeError:  # a value orjson refuses (a lone surrogate): the snapshots above go nowhere either,
            self._unwrite()  # so the next trace that refers to one must give it again
            raise
        return self._out

    def _unwrite(self) -> None:
        """Forget that the snapshots of ``_out`` were written (their trace failed to encode)."""
        gone = {orjson.loads(payload)["snapshot_id"] for kind, payload in self._out if kind is Kind.SNAPSHOT}
        for sid in gone:
            self._written.pop(sid, None)
        for key in [key for key, (_, sid) in self._by_object.items() if sid in gone]:
            del self._by_object[key]  # a hit there skips the check of _written

    def _decided_state(self, state: InstanceSnapshot) -> tuple[str, float | None, bool]:
        """A candidate's state: the id of its snapshot stored without its age, its age and stale flag."""
        return self._state_id(state, ageless=True), state.age_s, state.stale

    def _state_id(self, state: InstanceSnapshot, *, ageless: bool = False) -> str:
        """The id of ``state``'s snapshot, written once (``ageless``: without its ``age_s`` and ``stale``)."""
        hit = self._by_object.get(id(state))
        if hit is not None and hit[0] is state:
            return hit[1]
        body = orjson.dumps({**state.__dict__, "age_s": None, "stale": False}, default=_plain,
                            option=orjson.OPT_UTC_Z) if ageless else dumps(state)
        sid = content_id(body)
        if len(self._by_object) >= _CACHE_MAX:
            self._by_object.clear()
        self._by_object[id(state)] = (state, sid)
        if sid not in self._written:
            if len(self._written) >= _CACHE_MAX:
                self._written.clear()
            self._written[sid] = None
            seen = self._seen_at or state.scraped_at or self._clock()
            head = b'"snapshot_id":' + orjson.dumps(sid) + b',"seen_at":' + orjson.dumps(seen, option=orjson.OPT_UTC_Z)
            self._out.append((Kind.SNAPSHOT, _with(body, head)))
        return sid


def encode_batch(records: Sequence[BaseModel]) -> RecordBatch:
    """Encode records into one batch for a sink's ``prepare``/``write`` (tools and tests write directly)."""
    enc = Encoder()
    return batch_of([item for record in records for item in enc.encode(record)])


def _with(body: bytes, member: bytes) -> bytes:
    """Put ``"key":value`` first in a JSON object's bytes without parsing it again."""
    return b"{" + member + (b"," + body[1:] if len(body) > 2 else b"}")
