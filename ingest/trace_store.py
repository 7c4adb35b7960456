"""The query API of the trace store: one Protocol, answered alike by DuckDB and Elasticsearch.

Filters and results are the models of :mod:`schemas.queries`. Pages are newest first, keyed on
``(ts, request_id)``; the cursor is opaque (each backend writes its own).
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from ingest.kinds import Kind
from schemas.experiments import CompareBy, CompareQuery, CompareReport
from schemas.feedback import Feedback
from schemas.fleet import InstanceSnapshot
from schemas.policy_record import PolicyRecord
from schemas.probe import ProbeResult
from schemas.queries import (
    AggregateQuery,
    BucketStats,
    ConstraintStat,
    Misroute,
    TraceFilter,
    TracePage,
    TrafficEdge,
)
from schemas.records import QuarantinedRecord, RouterEvent
from schemas.trace import DecisionTrace

__all__ = [
    "MAX_LIMIT",
    "BadCursor",
    "TraceStore",
    "WindowReader",
    "clamp_limit",
    "decode_cursor",
    "encode_cursor",
    "sort_constraints",
    "sort_traffic",
]

MAX_LIMIT = 1000
_EVER = (datetime(1970, 1, 1, tzinfo=UTC), datetime(9999, 1, 1, tzinfo=UTC))  # a policy is found whenever stored


def clamp_limit(limit: int) -> int:
    """Return ``limit`` brought into ``[1, MAX_LIMIT]`` (the page sizes a backend answers)."""
    return max(1, min(limit, MAX_LIMIT))


class BadCursor(ValueError):
    """A pagination cursor that this store did not write."""


def encode_cursor(values: list[object]) -> str:
    """Return an opaque cursor for the sort values of the last row of a page."""
    return base64.urlsafe_b64encode(orjson.dumps(values)).decode()


def decode_cursor(cursor: str) -> list[object]:
    """Return the sort values of a cursor.

    Raises:
        BadCursor: It is not a cursor this module wrote.
    """
    try:
        values = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, orjson.JSONDecodeError) as exc:
        raise BadCursor("invalid cursor") from exc
    if not isinstance(values, list) or len(values) != 2:
        raise BadCursor("invalid cursor")
    return values


def sort_traffic(edges: list[TrafficEdge]) -> list[TrafficEdge]:
    """Busiest first, then by rule, model, instance (the same order on every backend)."""
    return sorted(edges, key=lambda e: (-e.requests, e.rule or "", e.model or "", e.instance or ""))


def sort_constraints(stats: list[ConstraintStat]) -> list[ConstraintStat]:
    """Most removals first, then most soft violations, then by constraint, instance, model."""
    return sorted(stats, key=lambda s: (-s.removed, -s.soft, s.constraint, s.instance, s.model))


class TraceStore(Protocol):
    """Reads traces and what surrounds them; every method is safe from any thread."""

    def get(self, request_id: str) -> DecisionTrace | None:
        """Return the trace of ``request_id`` (candidate states joined back), or None."""
        ...

    def search(self, flt: TraceFilter, limit: int = 50, cursor: str | None = None) -> TracePage:
        """Return one page of matching traces, newest first.

        Raises:
            BadCursor: ``cursor`` was not written by this store.
        """
        ...

    def aggregate(self, query: AggregateQuery) -> list[BucketStats]:
        """Return per-bucket request counts, latency quantiles, fallback rate, cost, misroute rate."""
        ...

    def traffic(self, flt: TraceFilter) -> list[TrafficEdge]:
        """Return request counts along rule -> model -> instance (see :func:`sort_traffic`)."""
        ...

    def constraint_stats(self, flt: TraceFilter) -> list[ConstraintStat]:
        """Return per (constraint, instance, model) removals, decisive ones and soft violations of matching traces.

        See :class:`schemas.queries.ConstraintStat`; ordered by :func:`sort_constraints`.
        """
        ...

    def misroutes(self, flt: TraceFilter, limit: int = 100) -> list[Misroute]:
        """Return feedback saying ``correct=false`` on traces matching ``flt``, newest feedback first."""
        ...

    def feedback(self, request_id: str, *, settle: bool = True) -> list[Feedback]:
        """Return every verdict recorded on ``request_id`` (correct or not), oldest first (at most ``MAX_LIMIT``).

        ``settle``: a store fed through a pipeline (a store process's API) writes what waits to be
        written first when it holds no verdict on the id, so one posted a moment ago is found
        (read-your-writes); False forces no write (a check made on every verdict must not turn the
        store's 2 s writes into one a verdict): with none written, the verdicts on the id that wait
        in its pipeline answer instead, from memory (one on its way counts as given). A store read
        directly has no pipeline: it reads what is written either way.
        """
        ...

    def experiment_groups(self, by: CompareBy, start: datetime, end: datetime) -> dict[str, int]:
        """Return the requests per arm, router version or policy hash (``by``) in ``[start, end)``, busiest first."""
        ...

    def compare(self, query: CompareQuery) -> CompareReport:
        """Compare two arms, router versions or policy hashes metric by metric (:mod:`ingest.experiments`)."""
        ...

    def experiment_series(self, by: CompareBy, a: str, b: str, query: AggregateQuery) -> dict[str, list[BucketStats]]:
        """Return each side's buckets of ``query`` holding a request, oldest first (keyed ``a`` and ``b``).

        As ``aggregate`` counts them, but without the requests forced onto an arm by header nor their
        feedback, as ``compare`` leaves them out. ``query.filter`` bounds the window and may narrow it.
        """
        ...

    def probe_timeline(
        self, start: datetime, end: datetime, instance: str | None = None, limit: int = MAX_LIMIT,
        kind: str | None = None,
    ) -> list[ProbeResult]:
        """Return probe results in ``[start, end)``, oldest first (of one instance and kind when given)."""
        ...

    def events(
        self, start: datetime, end: datetime, kind: str | None = None, limit: int = MAX_LIMIT
    ) -> list[RouterEvent]:
        """Return router events in ``[start, end)``, oldest first."""
        ...

    def snapshots(
        self, start: datetime, end: datetime, instance: str | None = None, limit: int = MAX_LIMIT
    ) -> list[InstanceSnapshot]:
        """Return instance snapshots first seen in ``[start, end)``, oldest first."""
        ...

    def quarantined(self, start: datetime, end: datetime, limit: int = MAX_LIMIT) -> list[QuarantinedRecord]:
        """Return quarantined records in ``[start, end)``, oldest first."""
        ...

    def policy(self, policy_hash: str) -> PolicyRecord | None:
        """Return the policy stored under ``policy_hash`` (what the traces naming it were decided with), or None."""
        ...


class WindowReader(ABC):
    """The time-window reads of :class:`TraceStore`, written once over one backend query.

    A backend implements :meth:`_window`; the public methods name the kind of record and its
    equality filters, and clamp ``limit`` with :func:`clamp_limit`.
    """

    @abstractmethod
    def _window(self, kind: Kind, start: datetime, end: datetime, eq: dict[str, str | None], limit: int) -> list[Any]:
        """Return records of ``kind`` in ``[start, end)`` matching ``eq`` (None: any), oldest first.

        Args:
            kind: Which records; their model, table and time field come from ``KINDS``.
            start: Inclusive lower bound of the time field.
            end: Exclusive upper bound of the time field.
            eq: Field equalities; a None value does not filter.
            limit: Most records returned, already clamped.
        """

    def probe_timeline(
        self, start: datetime, end: datetime, instance: str | None = None, limit: int = MAX_LIMIT,
        kind: str | None = None,
    ) -> list[ProbeResult]:
        """Return probe results in ``[start, end)``, oldest first (of one instance and kind when given)."""
        return self._window(Kind.PROBE, start, end, {"instance": instance, "kind": kind}, clamp_limit(limit))

    def events(
        self, start: datetime, end: datetime, kind: str | None = None, limit: int = MAX_LIMIT
    ) -> list[RouterEvent]:
        """Return router events in ``[start, end)``, oldest first."""
        return self._window(Kind.EVENT, start, end, {"kind": kind}, clamp_limit(limit))

    def snapshots(
        self, start: datetime, end: datetime, instance: str | None = None, limit: int = MAX_LIMIT
    ) -> list[InstanceSnapshot]:
        """Return instance snapshots first seen in ``[start, end)``, oldest first."""
        return self._window(Kind.SNAPSHOT, start, end, {"instance": instance}, clamp_limit(limit))

    def quarantined(self, start: datetime, end: datetime, limit: int = MAX_LIMIT) -> list[QuarantinedRecord]:
        """Return quarantined records in ``[start, end)``, oldest first."""
        return self._window(Kind.QUARANTINE, start, end, {}, clamp_limit(limit))

    def feedback(self, request_id: str, *, settle: bool = True) -> list[Feedback]:
        """Return every verdict recorded on ``request_id`` (correct or not), oldest first (at most ``MAX_LIMIT``).

        ``settle`` changes nothing here: the store is read directly (see :meth:`TraceStore.feedback`).
        """
        return self._window(Kind.FEEDBACK, _EVER[0], _EVER[1], {"request_id": request_id}, MAX_LIMIT)

    def policy(self, policy_hash: str) -> PolicyRecord | None:
        """Return the policy stored under ``policy_hash``, or None."""
        found = self._window(Kind.POLICY, _EVER[0], _EVER[1], {"policy_hash": policy_hash}, 1)
        return found[0] if found else None
