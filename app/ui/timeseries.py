"""Time-series hygiene shared by every chart over time: bucket size, gaps, the partial last bucket, the x range.

Pure, no Streamlit. The store answers only buckets that hold requests, aligned on the epoch
(:meth:`ingest.TraceStore.aggregate`); a chart drawn from that alone bridges an empty stretch with
a straight line and reads the still-filling last bucket as a drop. :func:`complete` puts every
bucket of the window back (empty ones with no rate: a gap) and marks the partial ones.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd

__all__ = [
    "BUCKET_SECONDS", "bucket_for", "bucket_label", "bucket_starts", "complete", "finer_bucket", "gap_breaks",
    "partial_span", "x_range",
]

# The store's buckets (schemas.queries.AggregateQuery.bucket), finest first.
BUCKET_SECONDS: dict[str, int] = {"1m": 60, "5m": 300, "15m": 900, "1h": 3600, "6h": 21_600, "1d": 86_400}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_POINTS = 20  # fewer points than this over the data's span is a picture of nothing
MAX_POINTS = 180


def bucket_for(span: timedelta) -> str:
    """The coarsest bucket that still gives at least :data:`MIN_POINTS` points over ``span`` (1m at the finest).

    15 min → 1m (15 points), 1 h → 1m (60), 6 h → 15m (24), 24 h → 1h (24), 7 d → 6h (28).
    """
    seconds = span.total_seconds()
    fitting = [b for b, w in BUCKET_SECONDS.items() if seconds / w >= MIN_POINTS]
    return fitting[-1] if fitting else "1m"


def finer_bucket(bucket: str, data_span: timedelta) -> str:
    """A finer bucket when the data covers too little of the window for ``bucket`` to draw a line.

    A 24 h window over an hour of traffic, bucketed hourly, is one point per series: the bucket
    then follows the span that holds data instead (never coarser than ``bucket``).
    """
    better = bucket_for(data_span)
    return better if BUCKET_SECONDS[better] < BUCKET_SECONDS[bucket] else bucket


def bucket_label(bucket: str) -> str:
    """``1-minute``, ``15-minute``, ``1-hour``, ``6-hour``, ``1-day`` (for a chart title)."""
    n, unit = int(bucket[:-1]), {"m": "minute", "h": "hour", "d": "day"}[bucket[-1]]
    return f"{n}-{unit}"


def _floor(ts: datetime, seconds: int) -> datetime:
    return ts - (ts - _EPOCH) % timedelta(seconds=seconds)


def bucket_starts(start: datetime, end: datetime, bucket: str) -> list[datetime]:
    """Every bucket start from the one holding ``start`` to the one holding the last instant before ``end``."""
    width = BUCKET_SECONDS[bucket]
    first, out = _floor(start, width), []
    step = timedelta(seconds=width)
    t = first
    while t < end:
        out.append(t)
        t += step
    return out


def complete(frame: pd.DataFrame, start: datetime, end: datetime, bucket: str, *, counts: tuple[str, ...] = (),
             zeros: tuple[str, ...] = (), key: str = "start") -> pd.DataFrame:
    """``frame`` (one row per non-empty bucket) with every bucket of ``[start, end)`` and a ``partial`` column.

    Missing buckets get 0 in the ``counts`` columns (integers) and ``zeros`` columns (sums such
    as cost), and no value (NaN) elsewhere, so a line
    breaks there instead of bridging it. ``partial`` is True for a bucket the window covers only
    in part: the last one when ``end`` falls inside it (still filling), the first when ``start``
    does. ``covered`` is the share of each bucket inside the window (1.0 for whole ones).
    """
    grid = pd.DataFrame({key: pd.to_datetime(bucket_starts(start, end, bucket), utc=True)})
    rows = frame.copy()
    if not rows.empty:
        rows[key] = pd.to_datetime(rows[key], utc=True)
    merged = grid.merge(rows, on=key, how="left") if not rows.empty else grid.reindex(
        columns=[key, *[c for c in frame.columns if c != key]])
    for column in counts:
        merged[column] = merged[column].fillna(0).astype("int64")
    for column in zeros:
        merged[column] = merged[column].astype("float64").fillna(0.0)
    width = timedelta(seconds=BUCKET_SECONDS[bucket])
    covered = []
    for t in merged[key]:
        lo, hi = max(t.to_pydatetime(), start), min(t.to_pydatetime() + width, end)
        covered.append(max((hi - lo) / width, 0.0))
    merged["covered"] = covered
    merged["partial"] = merged["covered"] < 0.999
    return merged


def partial_span(frame: pd.DataFrame, bucket: str, end: datetime, key: str = "start") -> tuple[Any, Any] | None:
    """``(x0, x1)`` of the still-filling last bucket of a :func:`complete` frame, None when it is whole."""
    if frame.empty or not bool(frame["partial"].iloc[-1]):
        return None
    last = frame[key].iloc[-1]
    if last.to_pydatetime() + timedelta(seconds=BUCKET_SECONDS[bucket]) <= end:
        return None
    return last, last + timedelta(seconds=BUCKET_SECONDS[bucket])


def x_range(start: datetime, end: datetime, bucket: str) -> list[datetime]:
    """The x axis of a bucketed chart: from the first bucket's start to the window's end.

    Fixing it keeps a series of one or two points from an axis labelled in milliseconds.
    """
    return [_floor(start, BUCKET_SECONDS[bucket]), end]


def gap_breaks(frame: pd.DataFrame, ts: str = "ts", factor: float = 3.0) -> pd.DataFrame:
    """Rows of a sampled series with a NaN row inserted inside every gap wider than ``factor`` × the usual step.

    Snapshots come about once a scrape; where none came for a while (the instance or the server
    was down), the inserted row breaks the line instead of letting it bridge the gap.
    """
    if len(frame) < 3:
        return frame
    ordered = frame.sort_values(ts, ignore_index=True)
    steps = ordered[ts].diff().dropna()
    usual = pd.Timedelta(steps.median())
    if pd.isna(usual) or usual <= pd.Timedelta(0):
        return ordered
    wide = steps[steps > usual * factor]
    if wide.empty:
        return ordered
    holes = pd.DataFrame({ts: [ordered[ts].iloc[i - 1] + steps.loc[i] / 2 for i in wide.index]})
    return pd.concat([ordered, holes], ignore_index=True).sort_values(ts, ignore_index=True)
