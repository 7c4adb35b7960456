"""Writes record batches to Elasticsearch: one data stream per kind, bulk ``create`` by id.

At the first write the sink puts one index template per kind (data stream, mapping derived from
``schemas/``, lifecycle with ``data_retention``: :mod:`ingest.elasticsearch.index_templates`). Each record is a bulk
``create`` with ``_id`` = its id (``request_id`` for traces), so re-delivery answers 409 and is
counted as a duplicate instead of being stored twice. A trace answered 409 is looked up (one search
per batch that has any, only then): a different trace stored under its ``request_id`` makes it no
duplicate but a conflict, returned for quarantine as the DuckDB sink does; not found (not
searchable yet: ``storage.elasticsearch.refresh`` false), it is counted a duplicate. The client's
bulk helper retries items answered 429 with exponential backoff. Only an item refused for what it
holds (400: a value that does not fit the mapping, a document the parser cannot read) is returned
for quarantine; an item refused for the sink's own reasons (401/403: the API key may not write,
404: no such index, 429 after the retries, 5xx), like a whole request refused or a connection refused, raises
:class:`SinkUnavailable`: the pipeline keeps the batch in the spool, counts a failed write and
tries again. The sink keeps what the failed attempt settled (items stored, already there, refused
for what they hold) and the retry of that batch sends only the rest: the items it stored are not
sent again to come back 409 and be counted duplicates, and a refused item is quarantined once.
The batch's result counts each item once, from the attempt that settled it. Feedback holds one
verdict per request id, as at the gateway and in DuckDB: its ``_id`` is the ``request_id`` (two
writers cannot both store one), and the verdicts stored on the batch's requests are looked up first
(one search per batch holding feedback: older versions keyed it by ``feedback_id``). A verdict on a
request holding another, stored or earlier in ``ts`` in the batch, is returned for quarantine
(:func:`ingest.record_sink.verdict_reason`); the same verdict again is a duplicate. Two verdicts an older version stored
on one request stay (a data stream cannot delete a document) until retention removes them. A
verdict is given its trace's context (``trace.*``: :func:`trace_context`) when the trace is in the
batch or stored; one stored before its trace has none until the sink's upkeep (``idle``) gives it
(:mod:`ingest.elasticsearch.late_context`), and the readers find its trace apart until then
(:mod:`ingest.elasticsearch.analytics`). Traces the
preparation refused (unchecked ones that do not hold: :func:`ingest.codec.unchecked.check_traces`)
are in the result's ``rejected``, for quarantine, as the DuckDB sink returns them.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from elastic_transport import TransportError
from elasticsearch import ApiError, Elasticsearch, helpers

from ingest.codec.unchecked import check_traces
from ingest.elasticsearch.index_templates import FEEDBACK_CONTEXT, TIMESTAMP_FIELD, data_stream, index_template
from ingest.elasticsearch.late_context import LateContext, trace_context
from ingest.errors import SinkUnavailable
from ingest.kinds import KINDS, Kind
from ingest.record_sink import (
    PreparedBatch,
    RecordBatch,
    Rejected,
    WriteResult,
    conflict_reason,
    same_trace,
    verdict_reason,
)

__all__ = ["ElasticsearchSink", "trace_context"]

log = logging.getLogger(__name__)
_CONTEXT_CACHE = 100_000
_SEARCH_MAX = 10_000  # Elasticsearch's default index.max_result_window
_DOCUMENT_FAULT = 400  # mapper_parsing_exception, document_parsing_exception, illegal_argument_exception
_INDEX_FAULTS = frozenset({"index_closed_exception"})  # answered 400, but the index's state, not the document's
_NOT_VERDICT = frozenset({"trace", TIMESTAMP_FIELD})  # what the sink adds to a feedback document


def _stream_of(index: str) -> str:
    """Return the data stream of a backing index name (``.ds-<stream>-<date>-<generation>``)."""
    if not index.startswith(".ds-"):
        return index
    parts = index[4:].split("-")
    while parts and parts[-1].isdigit():  # generation, and the yyyy.MM.dd of recent versions
        parts.pop()
        if parts and parts[-1].replace(".", "").isdigit() and "." in parts[-1]:
            parts.pop()
    return "-".join(parts)


def _is_document_fault(info: dict[str, Any]) -> bool:
    """Whether a failed bulk item was refused for what it holds (quarantine it), not for the sink's state (retry)."""
    return info.get("status") == _DOCUMENT_FAULT and (info.get("error") or {}).get("type") not in _INDEX_FAULTS


def _refusal(info: dict[str, Any]) -> str:
    err = info.get("error") or {}
    return f"Elasticsearch refused it ({info.get('status')}): {err.get('type')}: {err.get('reason')}"


class _Unstored:
    """Bulk items not stored for the sink's reasons: a count and the first reason of each (status, error type)."""

    def __init__(self) -> None:
        self.causes: dict[tuple[object, object], list[Any]] = {}

    def add(self, status: object, error: dict[str, Any]) -> None:
        self.causes.setdefault((status, error.get("type")), [0, error.get("reason")])[0] += 1

    def error(self) -> SinkUnavailable:
        total = sum(count for count, _ in self.causes.values())
        why = "; ".join(f"{n} x {status} {kind}: {reason}" for (status, kind), (n, reason) in self.causes.items())
        return SinkUnavailable(f"Elasticsearch did not store {total} items, not for what they hold ({why})")


@dataclass
class _Progress:
    """What the attempts at one prepared batch settled so far (kept while the pipeline retries it).

    Attributes:
        prepared: The batch (the pipeline retries the same object until it is taken).
        settled: Positions, in the batch's actions, of the items stored, already there or refused.
        result: Their counts and refusals (and the preparation's refusals).
    """

    prepared: PreparedBatch
    settled: set[int] = field(default_factory=set)
    result: WriteResult = field(default_factory=WriteResult)


def _same_verdict(held: dict[str, Any], doc: dict[str, Any]) -> bool:
    return all(held.get(k) == doc.get(k) for k in (set(held) | set(doc)) - _NOT_VERDICT)


def _when(doc: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(doc["ts"]).replace("Z", "+00:00"))


_SAME = {Kind.TRACE: same_trace, Kind.FEEDBACK: _same_verdict}
_REASON = {Kind.TRACE: conflict_reason, Kind.FEEDBACK: verdict_reason}


def _settle(progress: _Progress, at: int, kind: Kind, payload: bytes, doc: dict[str, Any], same: bool) -> None:
    """Settle a trace or verdict whose id is taken: the same again is a duplicate, another one is quarantined."""
    if same:
        progress.result.count(kind, 0, 1)
    else:
        progress.result.rejected.append(Rejected(kind, payload, _REASON[kind](str(doc["request_id"]))))
    progress.settled.add(at)


def _items(prepared: PreparedBatch) -> Iterator[tuple[int, Kind, bytes, dict[str, Any]]]:
    """The batch's items with their positions (what a retry's ``settled`` names)."""
    items = ((kind, payload, doc) for kind, docs in prepared.tables.items() for payload, doc in docs)
    for at, (kind, payload, doc) in enumerate(items):
        yield at, kind, payload, doc


class ElasticsearchSink:
    """The writing side of :class:`ingest.elasticsearch.store.ElasticsearchStore`.

    Args:
        client: An ``elasticsearch.Elasticsearch`` client.
        prefix: Data stream names start with ``<prefix>-``.
        retention_days: Lifecycle ``data_retention`` of every data stream.
        max_retries: Retries of items answered 429 (the bulk helper's exponential backoff).
        initial_backoff_s: First backoff of those retries.
        refresh: The bulk ``refresh`` parameter: ``wait_for`` (written traces are searchable when
            the pipeline forgets them), ``true`` (tests) or ``false``.
    """

    def __init__(self, client: Elasticsearch, *, prefix: str = "routelens", retention_days: int = 30,
                 max_retries: int = 5, initial_backoff_s: float = 1.0, refresh: str = "wait_for") -> None:
        self.client = client
        self.prefix = prefix
        self.retention_days = retention_days
        self.max_retries = max_retries
        self.initial_backoff_s = initial_backoff_s
        self.refresh = refresh
        self._templates_ready = False
        self._contexts: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._progress: _Progress | None = None  # the batch a failed write left partly settled
        self._late = LateContext(client, prefix, refresh)

    def ensure_templates(self) -> None:
        """Put the index template of every kind (idempotent: a newer mapping replaces the old)."""
        for kind in KINDS:
            body = index_template(self.prefix, kind, self.retention_days)
            self.client.indices.put_index_template(name=data_stream(self.prefix, kind), **body)
        self._templates_ready = True

    @staticmethod
    def prepare(batch: RecordBatch) -> PreparedBatch:
        """Decode the payloads into documents (``@timestamp`` added); no I/O."""
        prepared = PreparedBatch(batch, rejected=check_traces(batch).rejected)
        for kind, payloads in batch.payloads.items():
            info = KINDS[kind]
            docs = []
            for payload in payloads:
                doc = orjson.loads(payload)
                doc[TIMESTAMP_FIELD] = doc.get(info.time_field)
                docs.append((payload, doc))
            prepared.tables[kind] = docs
        return prepared

    def write(self, prepared: PreparedBatch) -> WriteResult:
        """Bulk-create the documents of a prepared batch.

        A retry of a batch (the same ``prepared``) sends only the items the earlier attempts did not
        settle, and returns the counts and refusals of every attempt (see the module's docstring).

        Raises:
            SinkUnavailable: Elasticsearch could not be reached or kept refusing (retry later).
        """
        progress = self._progress
        if progress is None or progress.prepared is not prepared:  # a new batch: the one before was taken
            progress = self._progress = _Progress(prepared, result=WriteResult(rejected=list(prepared.rejected)))
        try:
            if not self._templates_ready:
                self.ensure_templates()
            self._add_feedback_context(prepared)
            self._bulk(prepared, progress)
        except (ApiError, TransportError) as exc:
            raise SinkUnavailable(f"Elasticsearch: {exc}") from exc
        self._progress = None
        refused = {id(r.payload) for r in progress.result.rejected}  # a conflict's context is not the stored trace's
        stored = [doc for payload, doc in prepared.tables.get(Kind.TRACE, []) if id(payload) not in refused]
        for doc in stored:
            self._remember(doc)
        self._late.note(stored, (doc for payload, doc in prepared.tables.get(Kind.FEEDBACK, [])
                                 if id(payload) not in refused))
        return progress.result

    def idle(self) -> None:
        """Give the verdicts stored before their trace its context (:mod:`ingest.elasticsearch.late_context`).

        Raises:
            ApiError, TransportError: Elasticsearch failed (the upkeep is tried again at the next idle).
        """
        filled = self._late.upkeep()
        if filled:
            log.info("gave %d verdicts stored before their trace its context", filled)

    def _bulk(self, prepared: PreparedBatch, progress: _Progress) -> None:
        """Bulk-create the batch's items not settled yet, settling what Elasticsearch answers.

        Raises:
            SinkUnavailable: Some items were not stored for the sink's reasons (the rest are settled).
        """
        self._settle_verdicts(prepared, progress)
        actions: list[dict[str, Any]] = []
        waiting: dict[tuple[str, str], list[tuple[int, Kind, bytes, dict[str, Any]]]] = {}  # (stream, _id) -> items
        streams = {kind: (KINDS[kind].id_field, data_stream(self.prefix, kind)) for kind in prepared.tables}
        streams[Kind.FEEDBACK] = ("request_id", data_stream(self.prefix, Kind.FEEDBACK))  # one verdict per request
        for at, kind, payload, doc in _items(prepared):
            if at in progress.settled:
                continue
            id_field, stream = streams[kind]
            doc_id = str(doc[id_field])
            waiting.setdefault((stream, doc_id), []).append((at, kind, payload, doc))
            actions.append({"_op_type": "create", "_index": stream, "_id": doc_id, "_source": doc})
        if not actions:
            return
        result, settled, unstored = progress.result, progress.settled, _Unstored()
        taken: list[tuple[int, Kind, bytes, dict[str, Any]]] = []  # traces, verdicts answered 409: the same, or not?
        for ok, item in helpers.streaming_bulk(
            self.client, actions, raise_on_error=False, max_retries=self.max_retries,
            initial_backoff=self.initial_backoff_s, max_backoff=30, chunk_size=1000,
            refresh=self.refresh,
        ):
            info = next(iter(item.values()))
            sent = waiting.get((_stream_of(info.get("_index", "")), str(info.get("_id"))))
            if not sent:  # an answer for a document we did not send: count it as retryable
                log.warning("Elasticsearch answered for an unknown document %s", info.get("_id"))
                unstored.add(info.get("status"), {"type": "unknown_document", "reason": f"_id {info.get('_id')}"})
                continue
            at, kind, payload, doc = sent.pop(0)
            if ok:
                result.count(kind, 1, 0)
            elif info.get("status") == 409 and kind in (Kind.TRACE, Kind.FEEDBACK):  # settled below, once compared
                taken.append((at, kind, payload, doc))
                continue
            elif info.get("status") == 409:  # already stored: a re-delivery
                result.count(kind, 0, 1)
            elif _is_document_fault(info):
                result.rejected.append(Rejected(kind, payload, _refusal(info)))
            else:  # 401/403 (the key may not write), 404 (no such index), 429 after the retries, 5xx
                unstored.add(info.get("status"), info.get("error") or {})
                continue
            settled.add(at)
        for kind in (Kind.TRACE, Kind.FEEDBACK):
            if mine := [t for t in taken if t[1] is kind]:
                stored = self._stored(kind, sorted({str(t[3]["request_id"]) for t in mine}))
                for at, _, payload, doc in mine:  # not found: not searchable yet (``refresh``), a duplicate
                    held = stored.get(str(doc["request_id"]))
                    _settle(progress, at, kind, payload, doc, held is None or _SAME[kind](held, doc))
        if unstored.causes:  # the batch is retried: with the items not settled here only
            raise unstored.error()

    def _settle_verdicts(self, prepared: PreparedBatch, progress: _Progress) -> None:
        """Settle, before sending, the verdicts on requests holding another (stored, or earlier in ``ts`` in the batch).

        Raises:
            ApiError, TransportError: The search failed (nothing is settled: the retry looks again).
        """
        fresh = sorted(((at, payload, doc) for at, kind, payload, doc in _items(prepared)
                        if kind is Kind.FEEDBACK and at not in progress.settled), key=lambda i: (_when(i[2]), i[0]))
        held = self._stored(Kind.FEEDBACK, sorted({str(doc["request_id"]) for _, _, doc in fresh})) if fresh else {}
        for at, payload, doc in fresh:
            if (first := held.setdefault(str(doc["request_id"]), doc)) is not doc:
                _settle(progress, at, Kind.FEEDBACK, payload, doc, _same_verdict(first, doc))

    def _stored(self, kind: Kind, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The stored trace, or earliest verdict, of each of these request ids (those searchable)."""
        found: dict[str, dict[str, Any]] = {}
        step = _SEARCH_MAX // 2  # a search answers at most max_result_window hits; an older store's 2 verdicts fit
        for i in range(0, len(ids), step):
            answer = self.client.search(index=data_stream(self.prefix, kind), size=_SEARCH_MAX, ignore_unavailable=True,
                                        query={"terms": {"request_id": ids[i:i + step]}},
                                        sort=[{"ts": {"order": "asc"}}, {KINDS[kind].id_field: {"order": "asc"}}])
            for hit in answer["hits"]["hits"]:
                found.setdefault(str(hit["_source"]["request_id"]), hit["_source"])
        return found

    def _remember(self, doc: dict[str, Any]) -> None:
        self._contexts[str(doc["request_id"])] = trace_context(doc)
        if len(self._contexts) > _CONTEXT_CACHE:
            self._contexts.popitem(last=False)

    def _add_feedback_context(self, prepared: PreparedBatch) -> None:
        feedback = prepared.tables.get(Kind.FEEDBACK)
        if not feedback:
            return
        for _, doc in prepared.tables.get(Kind.TRACE, []):
            self._remember(doc)
        missing = sorted({d["request_id"] for _, d in feedback if d["request_id"] not in self._contexts})
        for i in range(0, len(missing), _SEARCH_MAX):  # a search answers at most max_result_window hits
            chunk = missing[i:i + _SEARCH_MAX]
            found = self.client.search(  # ignore_unavailable: feedback may come before any trace
                index=data_stream(self.prefix, Kind.TRACE), size=len(chunk), ignore_unavailable=True,
                query={"terms": {"request_id": chunk}}, source_includes=[*FEEDBACK_CONTEXT, "request_id", "outcome"],
            )
            for hit in found["hits"]["hits"]:
                self._remember(hit["_source"])
        for _, doc in feedback:
            ctx = self._contexts.get(doc["request_id"])
            if ctx is not None:
                doc["trace"] = ctx

    def close(self) -> None:
        """Close the client's connections."""
        self._progress = None
        self.client.close()
