"""The analytics reads of the Elasticsearch store: constraint binding counts and misroutes.

Misroutes are one search of the feedback stream, whose documents carry their trace's context
(``trace.*``), so the filter applies to the trace as on DuckDB. Two kinds of verdict need their
traces looked up instead, by every read that counts feedback (here, in the reader and in the
experiment reads), so that each counts what DuckDB counts (it joins feedback to traces when it
reads, whichever came first):

* A verdict stored before its trace carries no context (the sink found no trace to copy it from;
  it fills the context in once the trace is stored: :mod:`ingest.elasticsearch.late_context`).
  ``_verdicts_before_trace`` adds those: the verdicts without context, then their traces that match
  the read's filter.
* A filter setting a field the context does not carry (``violation``, ``otel_trace_id``:
  :func:`ingest.elasticsearch.filters.carried`) is answered by ``_joined``: the feedback and the
  traces matching it are paired in Python, from whichever side holds fewer documents (two counts
  decide), so that a filter selecting a handful of traces (one W3C trace id) reads a handful of
  verdicts, and one selecting many traces (a common violation) reads the window's feedback.

Constraint counts pair each nested
candidate with the trace's weights and selected total, which an aggregation cannot do: they page
through the newest ``SCAN_MAX`` matching traces (``search_after``, only the fields needed) and tally
them in Python (:class:`ingest.analytics.ConstraintTally`). A wider window is counted over its
newest ``SCAN_MAX`` traces; DuckDB counts all of them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ingest.analytics import ConstraintTally
from ingest.elasticsearch.filters import HAS_TRACE, and_query, carried, term
from ingest.elasticsearch.index_templates import FEEDBACK_CONTEXT
from ingest.elasticsearch.late_context import trace_context
from ingest.kinds import KINDS, Kind
from ingest.trace_store import clamp_limit
from schemas.queries import ConstraintStat, Misroute, TraceFilter

__all__ = ["PAGE", "SCAN_MAX", "ElasticsearchAnalytics", "VerdictTally", "epoch_ms"]

SCAN_MAX = 10_000
PAGE = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_VERDICT = [*KINDS[Kind.FEEDBACK].model.model_fields, "feedback_id"]  # what a verdict's figures read
_CONTEXT = [*FEEDBACK_CONTEXT, "request_id", "outcome"]  # what trace_context reads
_OLDEST = [{"ts": {"order": "asc"}}, {"feedback_id": {"order": "asc"}}]
_NEWEST = [{"ts": {"order": "desc"}}, {"feedback_id": {"order": "desc"}}]
_NEWEST_TRACES = [{"ts": {"order": "desc"}}, {"request_id": {"order": "desc"}}]
Verdict = tuple[dict[str, Any], dict[str, Any]]
"""A feedback document and its trace's context (``trace.*``, as :func:`ingest.elasticsearch.sink.trace_context`)."""


def epoch_ms(value: Any) -> int:
    """A document's instant as milliseconds since the epoch (what a ``date_histogram`` key is, floored)."""
    ts = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return ((ts if ts.tzinfo else ts.replace(tzinfo=UTC)) - _EPOCH) // _MS


@dataclass
class VerdictTally:
    """The feedback figures of a group of verdicts (a bucket, a side): as the feedback aggregations count them."""

    feedback: int = 0
    misroutes: int = 0
    expected: int = 0
    expected_match: int = 0

    def add(self, verdict: dict[str, Any], ctx: dict[str, Any]) -> None:
        """Count one verdict on a trace of context ``ctx``."""
        self.feedback += 1
        self.misroutes += verdict.get("correct") is False
        if (model := verdict.get("expected_model")) is not None:
            self.expected += 1
            self.expected_match += model == ctx.get("selected_model")


class ElasticsearchAnalytics:
    """``constraint_stats`` and ``misroutes`` over the reader's ``_search``."""

    @abstractmethod
    def _search(self, kind: Kind, **body: Any) -> dict[str, Any]:
        """Search the data stream of ``kind`` and return the response body."""

    @staticmethod
    @abstractmethod
    def _query(flt: TraceFilter, prefix: str = "") -> dict[str, Any]:
        """Return the ``bool`` query of ``flt``."""

    def constraint_stats(self, flt: TraceFilter) -> list[ConstraintStat]:
        """Return per (constraint, instance, model) counts over the newest ``SCAN_MAX`` matching traces."""
        tally, after, seen = ConstraintTally(), None, 0
        while seen < SCAN_MAX:
            body: dict[str, Any] = {
                "query": self._query(flt), "size": min(PAGE, SCAN_MAX - seen),
                "source_includes": ["selected_instance", "score_weights", "candidates"],
                "sort": [{"ts": {"order": "desc"}}, {"request_id": {"order": "desc"}}],
            }
            if after is not None:
                body["search_after"] = after
            hits = self._search(Kind.TRACE, **body)["hits"]["hits"]
            tally.add_all(h["_source"] for h in hits)
            seen += len(hits)
            if len(hits) < body["size"]:
                break
            after = list(hits[-1]["sort"])
        return tally.stats()

    def misroutes(self, flt: TraceFilter, limit: int = 100) -> list[Misroute]:
        """Return feedback with ``correct=false`` on traces matching ``flt``, newest feedback first."""
        limit = clamp_limit(limit)
        wrong = term("correct", False)
        found: list[Verdict]
        if carried(flt):
            query = and_query(self._query(flt, "trace."), wrong, HAS_TRACE)
            resp = self._search(Kind.FEEDBACK, query=query, size=limit, sort=_NEWEST)
            found = [(h["_source"], h["_source"].get("trace") or {}) for h in resp["hits"]["hits"]]
            found += self._verdicts_before_trace(self._query(flt), wrong)
        else:
            found = self._joined(self._query(flt), self._query(flt, "trace."), wrong, limit=limit)
        rows = sorted(((_misroute(src, ctx), str(src.get("feedback_id"))) for src, ctx in found),
                      key=lambda r: (r[0].ts, r[1]), reverse=True)
        return [m for m, _ in rows[:limit]]

    def _scan(self, kind: Kind, query: dict[str, Any], sort: list[dict[str, Any]],
              source: list[str]) -> Iterator[list[dict[str, Any]]]:
        """The hits of ``query`` in ``sort`` order, :data:`PAGE` at a time (``search_after``), read as consumed."""
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"query": query, "size": PAGE, "sort": sort, "source_includes": source}
            if after is not None:
                body["search_after"] = after
            hits = self._search(kind, **body)["hits"]["hits"]
            if hits:
                yield hits
            if len(hits) < PAGE:
                return
            after = list(hits[-1]["sort"])

    def _verdicts_before_trace(self, traces: dict[str, Any], *only: dict[str, Any]) -> list[Verdict]:
        """The verdicts stored before their trace (no ``trace.*``) whose trace ``traces`` selects, with its context.

        Pages of :data:`PAGE` verdicts without context (``only``: filters on them), oldest first, and
        for each page one search for their traces that the ``bool`` query ``traces`` selects. Few
        verdicts lack context (the sink fills it in once their trace is stored: those whose trace
        it has not stored yet, or never will): without any, this is one search answering nothing.
        """
        out: list[Verdict] = []
        lacking = {"bool": {"filter": list(only), "must_not": [HAS_TRACE]}}
        for hits in self._scan(Kind.FEEDBACK, lacking, _OLDEST, _VERDICT):
            ids = sorted({str(h["_source"]["request_id"]) for h in hits})
            found = self._search(Kind.TRACE, query=and_query(traces, {"terms": {"request_id": ids}}), size=len(ids),
                                 source_includes=_CONTEXT)["hits"]["hits"]
            ctx = {str(h["_source"]["request_id"]): trace_context(h["_source"]) for h in found}
            out += [(h["_source"], ctx[rid]) for h in hits if (rid := str(h["_source"]["request_id"])) in ctx]
        return out

    def _joined(self, traces: dict[str, Any], context: dict[str, Any], *only: dict[str, Any],
                limit: int | None = None) -> list[Verdict]:
        """Every verdict (``only``: filters on them) whose trace ``traces`` selects, with its trace's context.

        For a filter the feedback's context does not carry; ``context`` is the feedback query of what
        it carries (:func:`ingest.elasticsearch.filters.filter_query`), which holds every such verdict
        that has context. When no more traces match than verdicts do, the traces are read and their
        verdicts looked up; else the verdicts are read, newest first (``limit``: stop once that many
        matched), and their traces looked up, and the verdicts without context added apart.
        """
        wide = and_query(context, HAS_TRACE, *only)
        n = int(self._search(Kind.FEEDBACK, query=wide, size=0, track_total_hits=True)["hits"]["total"]["value"])
        if not n:
            return self._verdicts_before_trace(traces, *only)
        total = self._search(Kind.TRACE, query=traces, size=0, track_total_hits=n)["hits"]["total"]
        if total["relation"] == "eq" and int(total["value"]) <= n:
            return self._verdicts_of_traces(traces, *only)
        out: list[Verdict] = []
        for hits in self._scan(Kind.FEEDBACK, wide, _NEWEST, [*_VERDICT, "trace"]):
            ids = sorted({str(h["_source"]["request_id"]) for h in hits})
            found = self._search(Kind.TRACE, query=and_query(traces, {"terms": {"request_id": ids}}), size=len(ids),
                                 source_includes=["request_id"])["hits"]["hits"]
            keep = {str(h["_source"]["request_id"]) for h in found}
            out += [(h["_source"], h["_source"]["trace"]) for h in hits if str(h["_source"]["request_id"]) in keep]
            if limit is not None and len(out) >= limit:
                break
        return out + self._verdicts_before_trace(traces, *only)

    def _verdicts_of_traces(self, traces: dict[str, Any], *only: dict[str, Any]) -> list[Verdict]:
        """The verdicts (``only``: filters on them) on the traces ``traces`` selects, with or without context."""
        out: list[Verdict] = []
        for hits in self._scan(Kind.TRACE, traces, _NEWEST_TRACES, _CONTEXT):
            ctx = {str(h["_source"]["request_id"]): trace_context(h["_source"]) for h in hits}
            on = {"bool": {"filter": [{"terms": {"request_id": sorted(ctx)}}, *only]}}
            for found in self._scan(Kind.FEEDBACK, on, _OLDEST, _VERDICT):
                out += [(h["_source"], ctx[str(h["_source"]["request_id"])]) for h in found]
        return out

    def _tally_before_trace(self, traces: dict[str, Any],
                            key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
        """The verdicts stored before their trace (:meth:`_verdicts_before_trace`) counted by ``key(context)``."""
        return _tally(self._verdicts_before_trace(traces), key)

    def _tally_joined(self, traces: dict[str, Any], context: dict[str, Any],
                      key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
        """Every verdict on the traces ``traces`` selects (:meth:`_joined`) counted by ``key(context)``."""
        return _tally(self._joined(traces, context), key)


def _tally(verdicts: Iterable[Verdict], key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
    out: dict[Hashable, VerdictTally] = {}
    for verdict, ctx in verdicts:
        out.setdefault(key(ctx), VerdictTally()).add(verdict, ctx)
    return out


def _misroute(src: dict[str, Any], ctx: dict[str, Any]) -> Misroute:
    row = {"request_id": src["request_id"], "ts": src["ts"], "trace_ts": ctx.get("ts"),
           "selected_model": ctx.get("selected_model"), "selected_instance": ctx.get("selected_instance"),
           "rule": ctx.get("rule"), "expected_model": src.get("expected_model"),
           "expected_class": src.get("expected_class"), "source": src.get("source")}
    return Misroute.model_validate({k: v for k, v in row.items() if v is not None})
