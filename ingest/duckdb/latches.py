"""Latch out-intervals of a window, computed by DuckDB from the stored snapshots.

The gateway stores an :class:`schemas.fleet.InstanceSnapshot` each time an instance's state
changes: hundreds a minute per instance under load, each carrying its latches. A reader that wants
to know *when* latches were out needs the transitions, not the snapshots: one query of
``sql/latches.sql`` (window functions over ``instance_snapshots``: each latch's moves, dated by
its own ``since``, in time order per instance and constraint) answers them, whatever the window
holds, and whatever order the snapshots were stored in: an unreachable instance's rounds and
decisions all keep its last good scrape, and a snapshot shows a move after it happened.

:class:`LatchInterval` and :class:`LatchIntervals` are the answer here and over HTTP
(``GET /v1/analytics/latches``, :mod:`ingest.http_api.routes`).
"""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["INTERVAL_LIMIT", "DuckDBLatches", "LatchInterval", "LatchIntervals"]

# Intervals per answer at most (the newest): a week of one flapping latch every four minutes.
INTERVAL_LIMIT = 5000


class LatchInterval(BaseModel):
    """One stretch in which a hard constraint's latch held an instance out of the feasible set."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance: str
    model: str | None = Field(None, description="The instance's model, as the snapshot that began the interval has it.")
    constraint: str
    start: datetime = Field(description="When the latch went out (its `since`, else the first snapshot seen out).")
    end: datetime | None = Field(None, description="When it came back in (its `since`, else the first snapshot seen "
                                                   "in); None: still out at the last snapshot.")
    peak: float | None = Field(None, description="The highest value the snapshots showed while out.")


class LatchIntervals(BaseModel):
    """``GET /v1/analytics/latches``: out-intervals of a window, by instance, constraint and start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intervals: list[LatchInterval]
    snapshots: int = Field(ge=0, description="Snapshots in the window the intervals come from.")
    truncated: bool = Field(False, description="More intervals than the limit: the newest are returned.")


class DuckDBLatches:
    """``latch_intervals`` over the reader's ``_rows``."""

    @abstractmethod
    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """Run ``sql`` with ``params`` and return its rows as dicts."""

    def latch_intervals(
        self, start: datetime, end: datetime, instance: str | None = None, limit: int = INTERVAL_LIMIT
    ) -> LatchIntervals:
        """Return when each (instance, constraint) latch was out, from the snapshots first seen in ``[start, end)``.

        An interval runs from the latch's ``since`` when a snapshot shows it out to its ``since``
        when one shows it in again, whichever order the snapshots were seen in; a latch without
        a ``since`` moves when a snapshot is first seen showing the change. An interval that began
        before ``start`` starts at its ``since`` there. Snapshots without ``scraped_at`` are left out.

        Args:
            start: Inclusive lower bound of the snapshots' ``seen_at``.
            end: Exclusive upper bound.
            instance: Only this instance's latches (None: all).
            limit: Intervals at most, the newest (brought into ``[1, INTERVAL_LIMIT]``).
        """
        from ingest.duckdb.predicates import named_queries  # not at import: the HTTP client imports the models

        limit = max(1, min(limit, INTERVAL_LIMIT))
        where, params = "seen_at >= ? AND seen_at < ?", list[Any]([start, end])
        if instance is not None:
            where += " AND instance = ?"
            params.append(instance)
        queries = named_queries("latches.sql")
        counted = self._rows(queries["latch_snapshots"].format(where=where), params)
        rows = self._rows(queries["latch_intervals"].format(where=where), [*params, limit + 1])
        truncated = len(rows) > limit
        if truncated:  # one more than the limit, to know: drop the oldest
            rows.remove(min(rows, key=lambda r: r["start"]))
        return LatchIntervals(intervals=[LatchInterval.model_validate(r) for r in rows],
                              snapshots=int(counted[0]["n"]) if counted else 0, truncated=truncated)
