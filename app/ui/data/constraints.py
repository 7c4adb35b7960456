"""Latches now, latch intervals over a window and binding counts, as plain frames for the "Constraints" page.

Pure functions, no Streamlit, no I/O. A latch is *out* while it holds an instance out of the
feasible set; an interval runs from the latch going out to it coming back (``end`` None: still out).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

import pandas as pd
from pydantic import ValidationError

from app.ui.limits import Limits
from app.units import DASH, fmt
from schemas.fleet import InstanceSnapshot, LatchState
from schemas.queries import ConstraintStat
from schemas.records import RouterEvent

__all__ = [
    "BINDING_COLUMNS", "EVENT_COLUMNS", "INTERVAL_COLUMNS", "STATE_COLUMNS", "binding_counts", "chunk_spans",
    "interval_table", "intervals_frame", "latch_events", "latch_intervals", "read_whole", "state_rows",
]

T = TypeVar("T")

STATE_COLUMNS: tuple[str, ...] = ("instance", "model", "constraint", "state", "value", "reading", "since", "stale")
INTERVAL_COLUMNS: tuple[str, ...] = (
    "instance", "constraint", "start", "end", "is_open", "began_before", "duration_s", "peak",
)
EVENT_COLUMNS: tuple[str, ...] = ("ts", "instance", "constraint", "severity", "message")
BINDING_COLUMNS: tuple[str, ...] = (
    "constraint", "removed", "decisive", "not_decisive", "undecided", "soft", "decisive_share", "instances",
)


def chunk_spans(start: datetime, end: datetime, n: int) -> list[tuple[datetime, datetime]]:
    """``[start, end)`` cut into ``n`` equal, adjacent spans, oldest first (at least one).

    Snapshots are stored by when they were first seen, a time they do not carry, so they cannot
    be paged by time: a window is read as spans of at most one page each instead, so a page cut
    short loses only part of one span (latch times come from ``since``, not from the snapshot).
    """
    n = max(n, 1)
    step = (end - start) / n
    return [(start + step * i, end if i == n - 1 else start + step * (i + 1)) for i in range(n)]


def read_whole(
    read: Callable[[datetime, datetime], Sequence[T]], start: datetime, end: datetime, *, parts: int, page: int,
    budget: int,
) -> tuple[list[T], int]:
    """Everything ``read`` holds in ``[start, end)``, read in spans of at most one page each.

    The window is cut into ``parts`` spans (:func:`chunk_spans`); a span whose read fills a page
    may hold more, so it is read again as two halves, until each read is whole or ``budget``
    reads were made (a span that cannot be halved, under a millisecond, is kept as read).

    Args:
        read: ``(lo, hi)`` -> the records of ``[lo, hi)``, at most ``page`` of them.
        start: The window's start (inclusive).
        end: Its end (exclusive).
        parts: Spans read first.
        page: Most records one read returns.
        budget: Most reads made (at least ``parts``).

    Returns:
        The records (in no particular order) and how many spans were kept cut short.
    """
    todo, out, cut, reads = deque(chunk_spans(start, end, parts)), list[T](), 0, 0
    while todo:
        lo, hi = todo.popleft()
        got, reads = read(lo, hi), reads + 1
        if len(got) >= page and reads + len(todo) + 2 <= budget and hi - lo >= timedelta(milliseconds=2):
            mid = lo + (hi - lo) / 2
            todo.extendleft([(mid, hi), (lo, mid)])
            continue
        cut += len(got) >= page
        out += got
    return out, cut


def state_rows(payload: Mapping[str, Any] | None, limits: Limits | None = None) -> pd.DataFrame:
    """One row per (instance, constraint) latch of ``GET /v1/router/state``: ``state`` "out" or "in".

    ``reading`` is the value against the constraint's threshold in the metric's unit (``1.2% / 15%``)
    when ``limits`` names the constraint, else the value alone (``—`` without one).

    Takes ``{"instances": [snapshot, ...]}`` and an object keyed by instance id alike; entries that
    are not snapshots and latches that do not validate are skipped (a newer gateway never breaks
    the page). Rows by instance, then constraint.
    """
    listed = (payload or {}).get("instances")
    snaps: Iterable[Any] = listed if isinstance(listed, list) else (payload or {}).values()
    rows = []
    for snap in snaps:
        if not isinstance(snap, Mapping) or not isinstance(snap.get("instance"), str):
            continue
        for raw in snap.get("latches") or []:
            try:
                latch = LatchState.model_validate(raw)
            except ValidationError:
                continue
            reading = (limits.latch_text(latch.constraint, latch.value) if limits is not None
                       else DASH if latch.value is None else f"{latch.value:.3g}")
            rows.append({"instance": snap["instance"], "model": snap.get("model"), "constraint": latch.constraint,
                         "state": "out" if latch.out else "in", "value": latch.value, "reading": reading,
                         "since": latch.since, "stale": bool(snap.get("stale"))})
    frame = pd.DataFrame(rows, columns=list(STATE_COLUMNS)).astype({"value": "float64"})
    return frame.sort_values(["instance", "constraint"], kind="stable").reset_index(drop=True)


def latch_intervals(snapshots: Sequence[InstanceSnapshot], start: datetime, end: datetime) -> pd.DataFrame:
    """When each (instance, constraint) latch was out in ``[start, end)``, from stored snapshots.

    Snapshots are read in ``scraped_at`` order (those without one are skipped). A latch going out
    opens an interval at its ``since`` (the snapshot's time when ``since`` is missing or later);
    coming back closes it at its ``since`` (or the snapshot's time). An interval still open at the
    last snapshot has ``end`` None and ``is_open``; its duration runs to ``end`` of the window.
    ``began_before``: it opened before ``start`` (out already in the first snapshot).

    Returns:
        :data:`INTERVAL_COLUMNS`, by instance, constraint, start; ``peak`` the highest value seen while out.
    """
    timed = sorted((s for s in snapshots if s.scraped_at is not None), key=lambda s: (s.instance, s.scraped_at))
    opened: dict[tuple[str, str], dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for snap in timed:
        ts = snap.scraped_at
        assert ts is not None
        for latch in snap.latches:
            key = (snap.instance, latch.constraint)
            cur = opened.get(key)
            if latch.out and cur is None:
                began = latch.since if latch.since is not None and latch.since <= ts else ts
                opened[key] = {"instance": key[0], "constraint": key[1], "start": began, "end": None,
                               "peak": latch.value}
            elif latch.out and cur is not None and latch.value is not None:
                cur["peak"] = latch.value if cur["peak"] is None else max(cur["peak"], latch.value)
            elif not latch.out and cur is not None:
                since = latch.since
                cur["end"] = since if since is not None and cur["start"] <= since <= ts else ts
                rows.append(opened.pop(key))
    rows.extend(opened.values())
    return intervals_frame(rows, start, end)


def intervals_frame(intervals: Iterable[Mapping[str, Any]], start: datetime, end: datetime) -> pd.DataFrame:
    """Out-intervals (``instance``, ``constraint``, ``start``, ``end`` None while out, ``peak``) as the page's frame.

    The store's ``latch_intervals`` answers them (dumped to dicts) as :func:`latch_intervals` computes them
    here from snapshots; ``is_open``, ``began_before`` (before ``start``) and ``duration_s`` (an open
    one to ``end``) are added.

    Returns:
        :data:`INTERVAL_COLUMNS`, by instance, constraint, start.
    """
    rows = []
    for it in intervals:
        began, stop = it["start"], it.get("end")
        rows.append({"instance": it["instance"], "constraint": it["constraint"], "start": began, "end": stop,
                     "is_open": stop is None, "began_before": began < start,
                     "duration_s": ((stop or end) - began).total_seconds(), "peak": it.get("peak")})
    frame = pd.DataFrame(rows, columns=list(INTERVAL_COLUMNS)).astype({"duration_s": "float64", "peak": "float64"})
    return frame.sort_values(["instance", "constraint", "start"], kind="stable").reset_index(drop=True)


def latch_events(events: Sequence[RouterEvent], constraints: Iterable[str] = ()) -> pd.DataFrame:
    """Router events of kind ``latch``, oldest first; ``constraint``: the first known name the message starts with.

    Args:
        events: Router events (any kind; others are dropped).
        constraints: Constraint names to recognise in messages (e.g. those of the intervals).
    """
    names = sorted(set(constraints), key=len, reverse=True)
    rows = []
    for e in sorted((e for e in events if e.kind == "latch"), key=lambda e: e.ts):
        found = next((n for n in names if e.message.startswith(n) or f" {n}" in e.message), None)
        rows.append({"ts": e.ts, "instance": e.instance, "constraint": found, "severity": e.severity,
                     "message": e.message})
    return pd.DataFrame(rows, columns=list(EVENT_COLUMNS))


def interval_table(intervals: pd.DataFrame, limits: Limits) -> pd.DataFrame:
    """Out-intervals as read: times, ``still out`` for an open end, duration in s, peak against its threshold."""
    out = intervals.copy()
    out["start"] = [f"{s:%Y-%m-%d %H:%M:%S}" for s in intervals["start"]]
    out["end"] = ["still out" if e is None or pd.isna(e) else f"{e:%H:%M:%S}" for e in intervals["end"]]
    out["duration"] = [fmt(d, "s") for d in intervals["duration_s"]]
    out["peak"] = [limits.latch_text(c, None if pd.isna(p) else float(p))
                   for c, p in zip(intervals["constraint"], intervals["peak"], strict=True)]
    return out[["instance", "constraint", "start", "end", "duration", "peak"]]


def binding_counts(stats: Sequence[ConstraintStat]) -> pd.DataFrame:
    """Per constraint: removals split into decisive, not decisive and undecided, plus soft violations.

    ``decisive_share`` is decisive over the removals whose outcome is known (removed − undecided),
    None when none is. Most removals first, then by name.
    """
    acc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    where: dict[str, set[str]] = defaultdict(set)
    for s in stats:
        for field in ("removed", "decisive", "undecided", "soft"):
            acc[s.constraint][field] += getattr(s, field)
        where[s.constraint].add(s.instance)
    rows = []
    for name, c in acc.items():
        known = c["removed"] - c["undecided"]
        rows.append({"constraint": name, "removed": c["removed"], "decisive": c["decisive"],
                     "not_decisive": max(known - c["decisive"], 0), "undecided": c["undecided"], "soft": c["soft"],
                     "decisive_share": c["decisive"] / known if known > 0 else None, "instances": len(where[name])})
    frame = pd.DataFrame(rows, columns=list(BINDING_COLUMNS)).astype({"decisive_share": "float64"})
    return frame.sort_values(["removed", "constraint"], ascending=[False, True], kind="stable").reset_index(drop=True)
