"""The analytics reads of the Elasticsearch store: constraint binding counts and misroutes.

Misroutes are one search of the feedback stream, whose documents carry their trace's context
(``trace.*``), so the filter applies to the trace as on DuckDB. Constraint counts pair each nested
candidate with the trace's weights and selected total, which an aggregation cannot do: they page
through the newest ``SCAN_MAX`` matching traces (``search_after``, only the fields needed) and tally
them in Python (:class:`ingest.analytics.ConstraintTally`). A wider window is counted over its
newest ``SCAN_MAX`` traces; DuckDB counts all of them.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from ingest.analytics import ConstraintTally
from ingest.kinds import Kind
from ingest.trace_store import clamp_limit
from schemas.queries import ConstraintStat, Misroute, TraceFilter

__all__ = ["PAGE", "SCAN_MAX", "ElasticsearchAnalytics"]

SCAN_MAX = 10_000
PAGE = 1_000
_HAS_TRACE = {"range": {"trace.ts": {"gte": "1970-01-01T00:00:00+00:00"}}}  # feedback whose trace was found


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
        query = self._query(flt, "trace.")
        query["bool"]["filter"] += [{"term": {"correct": {"value": False}}}, _HAS_TRACE]
        resp = self._search(Kind.FEEDBACK, query=query, size=clamp_limit(limit),
                            sort=[{"ts": {"order": "desc"}}, {"feedback_id": {"order": "desc"}}])
        out = []
        for hit in resp["hits"]["hits"]:
            src, ctx = hit["_source"], hit["_source"].get("trace") or {}
            row = {"request_id": src["request_id"], "ts": src["ts"], "trace_ts": ctx.get("ts"),
                   "selected_model": ctx.get("selected_model"), "selected_instance": ctx.get("selected_instance"),
                   "rule": ctx.get("rule"), "expected_model": src.get("expected_model"),
                   "expected_class": src.get("expected_class"), "source": src.get("source")}
            out.append(Misroute.model_validate({k: v for k, v in row.items() if v is not None}))
        return out
