"""One instance's snapshots over a whole window, and the points a chart of them draws.

A gateway stores a snapshot of each instance every scrape round (about one a second): an hour is
3,600 of them, more than a page of the store. :func:`read_window` reads the window oldest first,
page after page, while that fits its budget, so every snapshot is read; past the budget it
samples: the window cut into equal spans, the oldest snapshots of each, so every stretch of the
window is represented and none is skipped. :func:`bucketed` then keeps a chart to at most
``max_points`` points: each bucket's highest value (a limit chart must show the moment a metric
crossed its limit, which a mean flattens), an empty bucket a gap (NaN), never a bridge.

One scrape has several stored rows: its round's snapshot (the gauges as scraped) and the states
decisions recorded on it, each with the requests then in flight added to its ``queue`` (the
router's view, :mod:`router_core.state.inflight`). The chart shows the instance's own gauges: the
first row of each scrape as the store orders them (by when it was seen: the round's), never a
decision's, which would put a sawtooth of the gateway's own requests into the instance's queue.

Pure, no Streamlit: the page passes the store's ``snapshots`` as ``fetch``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from app.ui.timeseries import gap_breaks
from schemas.fleet import InstanceSnapshot

__all__ = ["MAX_POINTS", "SAMPLE_SPANS", "WindowRead", "bucketed", "read_window"]

MAX_POINTS = 360  # a line of more points than this is no clearer, only heavier to send and draw
SAMPLE_SPANS = 180  # when the window is too big to read whole: this many equal spans, each sampled

Fetch = Callable[[datetime, datetime, int], Sequence[InstanceSnapshot]]


@dataclass(frozen=True)
class WindowRead:
    """One snapshot per scrape (by scrape time, oldest first); ``per_span`` > 0: sampled, at most so many a span."""

    snapshots: list[InstanceSnapshot]
    per_span: int = 0

    @property
    def is_sampled(self) -> bool:
        """True when only part of each span was read (the window held more than the budget)."""
        return self.per_span > 0


def _by_time(found: dict[datetime, InstanceSnapshot]) -> list[InstanceSnapshot]:
    return [found[t] for t in sorted(found)]


def _first_of_each_scrape(found: dict[datetime, InstanceSnapshot], got: Sequence[InstanceSnapshot]) -> None:
    """Keep each scrape's first row (the round's, with the scraped gauges), not a later decision's."""
    for s in got:
        if s.scraped_at is not None and s.scraped_at not in found:
            found[s.scraped_at] = s


def read_window(fetch: Fetch, start: datetime, end: datetime, *, page: int, max_pages: int = 8,
                spans: int = SAMPLE_SPANS) -> WindowRead:
    """Every snapshot of ``[start, end)`` within ``max_pages`` pages of ``page``, else a sample of each span.

    Args:
        fetch: ``(start, end, limit) -> snapshots`` of the instance, oldest first (the store's).
        start: The window's start.
        end: The window's end.
        page: The most a fetch answers.
        max_pages: Pages read in full before sampling.
        spans: Spans the window is cut into when sampled; each gets ``page * max_pages // spans``.
    """
    found: dict[datetime, InstanceSnapshot] = {}
    cursor = start
    for _ in range(max_pages):
        got = fetch(cursor, end, page)
        _first_of_each_scrape(found, got)
        if len(got) < page:
            return WindowRead(_by_time(found))
        last = got[-1].scraped_at
        if last is None or last <= cursor:
            break  # a page of one instant, or of unscraped states: paging by time cannot get past it
        cursor = last
    per_span = max(1, page * max_pages // spans)
    step = (end - start) / spans
    found = {}
    for i in range(spans):
        got = fetch(start + step * i, start + step * (i + 1), per_span)
        _first_of_each_scrape(found, got)
    return WindowRead(_by_time(found), per_span)


def bucketed(series: pd.DataFrame, start: datetime, end: datetime, *, max_points: int = MAX_POINTS,
             ts: str = "ts") -> tuple[pd.DataFrame, timedelta | None]:
    """``series`` as a chart draws it over ``[start, end)``: gaps broken, at most ``max_points`` rows.

    Up to ``max_points`` rows it is the series itself, a NaN row inside every gap
    (:func:`app.ui.timeseries.gap_breaks`). Beyond, one row per bucket of equal width (whole
    seconds) from ``start``: the bucket's start and the highest value of each column in it; a
    bucket without a snapshot has NaN everywhere, so the line breaks there.

    Returns:
        The rows and the bucket width (None when not bucketed).
    """
    if len(series) <= max_points:
        return gap_breaks(series, ts), None
    width = timedelta(seconds=max(1, math.ceil((end - start).total_seconds() / max_points)))
    first = pd.Timestamp(start)
    starts = pd.date_range(first, end, freq=width, inclusive="left")
    index = (pd.to_datetime(series[ts], utc=True) - first) // pd.Timedelta(width)
    values = series.drop(columns=ts).apply(pd.to_numeric, errors="coerce").astype("float64")
    grouped = values.groupby(index.to_numpy()).max()
    out = grouped.reindex(range(len(starts)))
    out.insert(0, ts, starts)
    return out.reset_index(drop=True), width
