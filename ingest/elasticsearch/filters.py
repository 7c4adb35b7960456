"""A :class:`TraceFilter` as Elasticsearch queries: on traces, and on the trace context feedback carries.

Filters become ``bool.filter`` clauses (``term``, ``range``: values are never spliced into query
strings). A feedback document carries its trace's context (``trace.*``: the fields of
:data:`ingest.elasticsearch.index_templates.FEEDBACK_CONTEXT`, ``outcome_status`` and ``total_ms``), so
most fields filter feedback directly; not ``otel_trace_id`` (not copied) nor ``violation`` (the
candidates are not copied). A filter setting one of those is not :func:`carried`: its feedback is
joined to the traces that match (:meth:`ingest.elasticsearch.analytics.ElasticsearchAnalytics._joined`).

``unset`` (a rule, model or instance that must be empty) is a ``must_not`` ``exists`` query: a field
holding ``null`` or missing is not indexed, as a null column is NULL in DuckDB. The context holds
all three, so it is carried; on feedback the clause needs the context itself (:data:`HAS_TRACE`),
else a verdict stored before its trace (no ``trace.*``) would pass it.
"""

from __future__ import annotations

from typing import Any

from ingest.elasticsearch.index_templates import FEEDBACK_CONTEXT
from schemas.queries import UNSET_FIELDS, TraceFilter

__all__ = ["HAS_TRACE", "and_query", "carried", "filter_query", "term"]

_TERMS = {"router_version": "router_version", "experiment_arm": "experiment_arm", "rule": "rule",
          "model": "selected_model", "instance": "selected_instance", "fallback": "fallback_triggered",
          "outcome": "outcome.status", "query_hash": "query_hash",
          "otel_trace_id": "otel_trace_id"}
# A trace field -> its name in a feedback document's context, for the fields the context holds.
_CONTEXT = {**{name: name for name in FEEDBACK_CONTEXT}, "outcome.status": "outcome_status",
            "outcome.total_ms": "total_ms"}
_UNCARRIED = tuple(name for name, field in _TERMS.items() if field not in _CONTEXT) + ("violation",)
HAS_TRACE: dict[str, Any] = {"range": {"trace.ts": {"gte": "1970-01-01T00:00:00+00:00"}}}
"""Feedback whose trace the sink found (it holds ``trace.*``)."""


def term(field: str, value: Any) -> dict[str, Any]:
    """Return a ``term`` query in the long form the specification documents."""
    return {"term": {field: {"value": value}}}


def carried(flt: TraceFilter) -> bool:
    """Whether feedback's trace context answers every field ``flt`` sets (else its feedback is joined)."""
    return all(getattr(flt, name) is None for name in _UNCARRIED)


def filter_query(flt: TraceFilter, prefix: str = "") -> dict[str, Any]:
    """Return the ``bool`` query of a filter on traces, or with ``prefix`` ``trace.`` on feedback.

    On feedback it holds the fields the context carries only: exactly ``flt`` when :func:`carried`,
    else a wider query (every verdict ``flt`` selects, and others).
    """
    clauses: list[dict[str, Any]] = []
    for name, field in _TERMS.items():
        value = getattr(flt, name)
        if value is not None and (not prefix or field in _CONTEXT):
            clauses.append(term(prefix + _CONTEXT[field] if prefix else field, getattr(value, "value", value)))
    bounds = {op: getattr(flt, name).isoformat() for op, name in (("gte", "start"), ("lt", "end"))
              if getattr(flt, name) is not None}
    if bounds:
        clauses.append({"range": {prefix + "ts": bounds}})
    latency = {op: getattr(flt, name) for op, name in (("gte", "min_latency_ms"), ("lt", "max_latency_ms"))
               if getattr(flt, name) is not None}
    if latency:
        clauses.append({"range": {(prefix + "total_ms") if prefix else "outcome.total_ms": latency}})
    if flt.violation is not None and not prefix:
        clauses.append({"nested": {"path": "candidates",
                                   "query": term("candidates.violations.constraint", flt.violation)}})
    if flt.unset:  # a clause of its own: callers add their own must_not to the query (and_query, _sides)
        fields = [prefix + _CONTEXT[UNSET_FIELDS[name]] if prefix else UNSET_FIELDS[name] for name in flt.unset]
        clauses += [HAS_TRACE] if prefix else []
        clauses.append({"bool": {"must_not": [{"exists": {"field": field}} for field in fields]}})
    return {"bool": {"filter": clauses}}


def and_query(query: dict[str, Any], *filters: dict[str, Any], must_not: tuple[dict[str, Any], ...] = ()
              ) -> dict[str, Any]:
    """Return the ``bool`` query ``query`` with more ``filter`` and ``must_not`` clauses (``query`` is not changed)."""
    body = dict(query["bool"])
    body["filter"] = [*body.get("filter", []), *filters]
    if must_not or "must_not" in body:
        body["must_not"] = [*body.get("must_not", []), *must_not]
    return {"bool": body}
