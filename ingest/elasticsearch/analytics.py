"""The analytics reads of the Elasticsearch store: constraint binding counts and misroutes.

Misroutes are one search of the feedback stream, whose documents carry their trace's context
(``trace.*``), so the filter applies to the trace as on DuckDB. A verdict stored before its trace
carries none (the sink found no trace to copy it from, and a data stream's documents are not
updated): every read that counts feedback (here, in the reader and in the experiment reads) adds
those verdicts apart, found by ``_verdicts_before_trace`` (the verdicts without context, then
their traces that match the read's filter). So it counts what DuckDB counts, which joins feedback
to traces when it reads, whichever came first. Constraint counts pair each nested
candidate with the trace's weights and selected total, which an aggregation cannot do: they page
through the newest ``SCAN_MAX`` matching traces (``search_after``, only the fields needed) and tally
them in Python (:class:`ingest.analytics.ConstraintTally`). A wider window is counted over its
newest ``SCAN_MAX`` traces; DuckDB counts all of them.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from ingest.analytics import ConstraintTally
from ingest.elasticsearch.index_templates import FEEDBACK_CONTEXT
from ingest.elasticsearch.sink import trace_context
from ingest.kinds import Kind
from ingest.trace_store import clamp_limit
from schemas.queries import ConstraintStat, Misroute, TraceFilter

__all__ = ["PAGE", "SCAN_MAX", "ElasticsearchAnalytics", "VerdictTally", "epoch_ms"]

SCAN_MAX = 10_000
PAGE = 1_000
_HAS_TRACE = {"range": {"trace.ts": {"gte": "1970-01-01T00:00:00+00:00"}}}  # feedback whose trace was found
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
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
        wrong = {"term": {"correct": {"value": False}}}
        query = self._query(flt, "trace.")
        query["bool"]["filter"] += [wrong, _HAS_TRACE]
        resp = self._search(Kind.FEEDBACK, query=query, size=clamp_limit(limit),
                            sort=[{"ts": {"order": "desc"}}, {"feedback_id": {"order": "desc"}}])
        found = [(h["_source"], h["_source"].get("trace") or {}) for h in resp["hits"]["hits"]]
        found += self._verdicts_before_trace(self._query(flt), wrong)
        rows = sorted(((_misroute(src, ctx), str(src.get("feedback_id"))) for src, ctx in found),
                      key=lambda r: (r[0].ts, r[1]), reverse=True)
        return [m for m, _ in rows[:clamp_limit(limit)]]

    def _verdicts_before_trace(self, traces: dict[str, Any], *only: dict[str, Any]) -> list[Verdict]:
        """The verdicts stored before their trace (no ``trace.*``) whose trace ``traces`` selects, with its context.

        Pages of :data:`PAGE` verdicts without context (``only``: filters on them), oldest first, and
        for each page one search for their traces that the ``bool`` query ``traces`` selects. Few
        verdicts are stored before their trace (one sent through another gateway worker before the
        trace was delivered, a relay, a file): without any, this is one search answering nothing.
        """
        out: list[Verdict] = []
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"query": {"bool": {"filter": list(only), "must_not": [_HAS_TRACE]}}, "size": PAGE,
                                    "sort": [{"ts": {"order": "asc"}}, {"feedback_id": {"order": "asc"}}]}
            if after is not None:
                body["search_after"] = after
            hits = self._search(Kind.FEEDBACK, **body)["hits"]["hits"]
            if hits:
                ids = sorted({str(h["_source"]["request_id"]) for h in hits})
                query = {"bool": {**traces["bool"], "filter": [*traces["bool"].get("filter", []),
                                                              {"terms": {"request_id": ids}}]}}
                found = self._search(Kind.TRACE, query=query, size=len(ids),
                                     source_includes=[*FEEDBACK_CONTEXT, "request_id", "outcome"])["hits"]["hits"]
                ctx = {str(h["_source"]["request_id"]): trace_context(h["_source"]) for h in found}
                out += [(h["_source"], ctx[rid]) for h in hits if (rid := str(h["_source"]["request_id"])) in ctx]
            if len(hits) < PAGE:
                return out
            after = list(hits[-1]["sort"])

    def _tally_before_trace(self, traces: dict[str, Any],
                            key: Callable[[dict[str, Any]], Hashable]) -> dict[Hashable, VerdictTally]:
        """The verdicts stored before their trace (:meth:`_verdicts_before_trace`) counted by ``key(context)``."""
        out: dict[Hashable, VerdictTally] = {}
        for verdict, ctx in self._verdicts_before_trace(traces):
            out.setdefault(key(ctx), VerdictTally()).add(verdict, ctx)
        return out


def _misroute(src: dict[str, Any], ctx: dict[str, Any]) -> Misroute:
    row = {"request_id": src["request_id"], "ts": src["ts"], "trace_ts": ctx.get("ts"),
           "selected_model": ctx.get("selected_model"), "selected_instance": ctx.get("selected_instance"),
           "rule": ctx.get("rule"), "expected_model": src.get("expected_model"),
           "expected_class": src.get("expected_class"), "source": src.get("source")}
    return Misroute.model_validate({k: v for k, v in row.items() if v is not None})
