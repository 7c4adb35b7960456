"""Gives a verdict stored before its trace that trace's context, once the trace is stored.

The sink copies a trace's context (``trace.*``) into each verdict it stores when it finds the trace.
A verdict stored first (sent through another gateway worker before that worker delivered the trace,
a relay, a file) has none, and every read that counts feedback pages through such verdicts and
looks their traces up (:mod:`ingest.elasticsearch.analytics`). Left so, they would pile up for the
whole retention, and every read would pay for all of them, in any window. So the sink fills the
context in, as upkeep when nothing waits to be written (``idle``), from what its writes noted:

* the verdicts without context on the traces it stored since (one search per 5,000 of them);
* its own verdicts stored without context: their traces are looked up once more (another worker
  may have stored one while the verdict was on its way; that worker's upkeep may have looked first);
* once after start, every verdict without context whose trace is stored (an older version's, or
  those a failed upkeep left).

A verdict is re-indexed in place, with its trace's context: the bulk ``index`` operation on its
backing index with ``if_seq_no`` and ``if_primary_term`` (how a data stream's document is updated;
one changed since, by another worker's upkeep, answers 409 and is left as it is). A verdict is
counted the same with context or without, so this changes no figure, only what a read costs. An
item refused otherwise (an API key with ``create_doc`` but not ``index`` on the feedback stream:
403) is logged once and left: reads keep looking its trace up.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from elasticsearch import Elasticsearch

from ingest.elasticsearch.filters import HAS_TRACE
from ingest.elasticsearch.index_templates import FEEDBACK_CONTEXT, data_stream
from ingest.kinds import Kind

__all__ = ["PENDING_MAX", "LateContext"]

log = logging.getLogger(__name__)
PENDING_MAX = 100_000  # request ids noted between two upkeeps (a few MB); beyond, the oldest wait for a start's sweep
_CHUNK = 5_000  # ids per search: an older store's two verdicts a request fit in max_result_window (10,000)
_LACKING_ORDER = [{"ts": {"order": "asc"}}, {"feedback_id": {"order": "asc"}}]


def trace_context(doc: dict[str, Any]) -> dict[str, Any]:
    """What of a trace document its feedback documents carry (``trace.*``: the mapping's ``FEEDBACK_CONTEXT``)."""
    ctx = {name: doc.get(name) for name in FEEDBACK_CONTEXT}
    ctx["outcome_status"] = (doc.get("outcome") or {}).get("status")
    ctx["total_ms"] = (doc.get("outcome") or {}).get("total_ms")
    return ctx


class LateContext:
    """The sink's upkeep of verdicts stored before their trace (see the module's docstring).

    Args:
        client: The sink's client.
        prefix: Data stream name prefix.
        refresh: The bulk ``refresh`` parameter of the updates.
    """

    def __init__(self, client: Elasticsearch, prefix: str, refresh: str) -> None:
        self.client = client
        self.prefix = prefix
        self.refresh = refresh
        # Request ids whose verdict may lack a context its trace could give: traces stored since the last
        # upkeep, and verdicts stored without context (their trace may have been stored meanwhile).
        self._pending: OrderedDict[str, None] = OrderedDict()
        self._swept = False
        self._said_refused = False

    def note(self, traces: Iterable[dict[str, Any]], verdicts: Iterable[dict[str, Any]]) -> None:
        """Note what a write stored: trace documents, and verdict documents (those without ``trace``); no I/O."""
        for doc in traces:
            self._pending[str(doc["request_id"])] = None
        for doc in verdicts:
            if "trace" not in doc:
                self._pending[str(doc["request_id"])] = None
        while len(self._pending) > PENDING_MAX:
            self._pending.popitem(last=False)

    def upkeep(self) -> int:
        """Fill in what the writes since noted (and, the first time, sweep); return the verdicts given context.

        One search per :data:`_CHUNK` request ids noted, for their verdicts without context; for any
        found, one search for their traces and one bulk request.

        Raises:
            ApiError, TransportError: A search or the bulk request failed (what was noted waits for the next upkeep).
        """
        filled = 0 if self._swept else self._sweep()
        self._swept = True
        ids = sorted(self._pending)
        for i in range(0, len(ids), _CHUNK):
            hits = self._search(Kind.FEEDBACK, {"terms": {"request_id": ids[i:i + _CHUNK]}}, size=2 * _CHUNK,
                                seq_no_primary_term=True)
            if hits:
                filled += self._update(hits, self._contexts(sorted({str(h["_source"]["request_id"]) for h in hits})))
        self._pending.clear()
        return filled

    def _sweep(self) -> int:
        """Every verdict without context whose trace is stored, a page at a time: given its context."""
        filled, after = 0, None
        while True:
            body: dict[str, Any] = {"size": 1_000, "sort": _LACKING_ORDER, "seq_no_primary_term": True}
            if after is not None:
                body["search_after"] = after
            hits = self._search(Kind.FEEDBACK, None, **body)
            if hits:
                filled += self._update(hits, self._contexts(sorted({str(h["_source"]["request_id"]) for h in hits})))
            if len(hits) < body["size"]:
                return filled
            after = list(hits[-1]["sort"])

    def _search(self, kind: Kind, clause: dict[str, Any] | None, **body: Any) -> list[dict[str, Any]]:
        """Hits of the verdicts without context (``kind`` FEEDBACK) or of the traces, narrowed by ``clause``."""
        query: dict[str, Any] = {"bool": {"filter": [clause] if clause else []}}
        if kind is Kind.FEEDBACK:
            query["bool"]["must_not"] = [HAS_TRACE]
        resp = self.client.search(index=data_stream(self.prefix, kind), ignore_unavailable=True, query=query, **body)
        return list(resp["hits"]["hits"])

    def _contexts(self, ids: list[str]) -> dict[str, dict[str, Any]]:
        """The context of each stored trace of these request ids."""
        if not ids:
            return {}
        hits = self._search(Kind.TRACE, {"terms": {"request_id": ids}}, size=len(ids),
                            source_includes=[*FEEDBACK_CONTEXT, "request_id", "outcome"])
        return {str(h["_source"]["request_id"]): trace_context(h["_source"]) for h in hits}

    def _update(self, hits: list[dict[str, Any]], contexts: dict[str, dict[str, Any]]) -> int:
        """Re-index each verdict of ``hits`` whose trace has a context with it, where it is; return how many."""
        ops: list[dict[str, Any]] = []
        for h in hits:
            ctx = contexts.get(str(h["_source"]["request_id"]))
            if ctx is not None:
                ops += [{"index": {"_index": h["_index"], "_id": h["_id"], "if_seq_no": h["_seq_no"],
                                   "if_primary_term": h["_primary_term"]}}, {**h["_source"], "trace": ctx}]
        if not ops:
            return 0
        items = [next(iter(i.values())) for i in self.client.bulk(operations=ops, refresh=self.refresh)["items"]]
        refused = [i for i in items if i.get("status") not in (200, 201, 409)]  # 409: changed since (another upkeep)
        if refused and not self._said_refused:
            self._said_refused = True
            err = refused[0].get("error") or {}
            log.warning("Elasticsearch refused to give %d verdicts stored before their trace its context (%s %s: %s);"
                        " reads keep looking their traces up", len(refused), refused[0].get("status"),
                        err.get("type"), err.get("reason"))
        return sum(1 for i in items if i.get("status") in (200, 201))
