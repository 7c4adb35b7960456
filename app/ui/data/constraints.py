"""Latches now, latch intervals over a window and binding counts, as plain frames for the "Constraints" page.

Pure functions, no Streamlit, no I/O. A latch is *out* while it holds an instance out of the
feasible set; an interval runs from the latch going out to it coming back (``end`` None: still out).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
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
    "interval_table", "intervals_frame", "latch_events", "latch_intervals", "latch_table",
    "of_model", "read_whole", "scope_words", "state_rows",
]

T = TypeVar("T")

STATE_COLUMNS: tuple[str, ...] = ("instance", "model", "constraint", "state", "value", "reading", "since", "stale")
INTERVAL_COLUMNS: tuple[str, ...] = (
    "instance", "model", "constraint", "start", "end", "is_open", "began_before", "duration_s", "peak",
)
EVENT_COLUMNS: tuple[str, ...] = ("ts", "instance", "model", "constraint", "severity", "message")
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


def latch_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The latches of :func:`state_rows` as read: ``since`` in UTC as text (``—`` without one), no raw value.

    A column of times and dashes mixed is not one type: Streamlit's conversion of it failed (and
    printed a traceback) before showing it with the time's full microseconds and offset.
    """
    out = rows.drop(columns="value").copy()
    out["since"] = [_utc(t) for t in rows["since"]]
    out["model"] = rows["model"].fillna(DASH)
    return out.rename(columns={"since": "since (UTC)"})


def _utc(ts: Any) -> str:
    if ts is None or pd.isna(ts):  # NaT is a datetime too
        return DASH
    return f"{ts.astimezone(UTC):%Y-%m-%d %H:%M:%S}"


def of_model(frame: pd.DataFrame, model: str | None) -> pd.DataFrame:
    """The rows of ``frame`` (a ``model`` column: the instance's model as its snapshot or event has it) of ``model``.

    All rows when ``model`` is None; under a model, a row that names none is left out (it cannot be shown to
    serve that model), so the sidebar's model narrows every section of the page alike.
    """
    if model is None or frame.empty:
        return frame
    return frame[frame["model"] == model].reset_index(drop=True)


def scope_words(model: str | None, instance: str | None) -> str:
    """The sidebar's narrowing as words for an empty section (``of model `m` and instance `a```), else ""."""
    parts = [f"{name} `{value}`" for name, value in (("model", model), ("instance", instance)) if value]
    return ("of " + " and ".join(parts)) if parts else ""


def latch_intervals(snapshots: Sequence[InstanceSnapshot], start: datetime, end: datetime) -> pd.DataFrame:
    """When each (instance, constraint) latch was out in ``[start, end)``, from stored snapshots.

    A latch's ``since`` is when it last changed, so each distinct ``(since, out)`` a snapshot shows
    is one transition at that time, whatever order the snapshots come in: a crashed instance's
    snapshots all carry its last scrape's ``scraped_at`` (with a growing ``age_s``), and the states
    stored at decisions carry no age at all, so no order of snapshots tells when a latch moved. A
    latch out without a ``since`` goes out at the snapshot's ``scraped_at``. An interval runs from a
    transition out to the next one in; one still open has ``end`` None and ``is_open``, its duration
    running to ``end`` of the window. ``began_before``: it opened before ``start``.

    Returns:
        :data:`INTERVAL_COLUMNS`, by instance, constraint, start; ``peak`` the highest value seen while out.
    """
    moves: dict[tuple[str, str], dict[tuple[datetime, bool], float | None]] = defaultdict(dict)
    models: dict[tuple[str, str, datetime], str] = {}  # the model of the snapshot that showed each out move first
    for snap in snapshots:
        if snap.scraped_at is None:
            continue
        for latch in snap.latches:
            when = latch.since if latch.since is not None else snap.scraped_at if latch.out else None
            if when is None:
                continue  # in since ever: no transition
            seen = moves[(snap.instance, latch.constraint)]
            models.setdefault((snap.instance, latch.constraint, when), snap.model)
            peak = seen.get((when, latch.out))
            seen[(when, latch.out)] = peak if latch.value is None else (
                latch.value if peak is None else max(peak, latch.value))
    rows: list[dict[str, Any]] = []
    for (instance, constraint), seen in moves.items():
        cur: dict[str, Any] | None = None
        for (when, out), value in sorted(seen.items(), key=lambda kv: (kv[0][0], not kv[0][1])):
            if out and cur is None:
                cur = {"instance": instance, "model": models.get((instance, constraint, when)),
                       "constraint": constraint, "start": when, "end": None, "peak": value}
            elif out and cur is not None and value is not None:  # a later since while out: still one stretch
                cur["peak"] = value if cur["peak"] is None else max(cur["peak"], value)
            elif not out and cur is not None:
                cur["end"] = when
                rows.append(cur)
                cur = None
        if cur is not None:
            rows.append(cur)
    return intervals_frame(rows, start, end)


def intervals_frame(intervals: Iterable[Mapping[str, Any]], start: datetime, end: datetime) -> pd.DataFrame:
    """Out-intervals (``instance``, ``model``, ``constraint``, ``start``, ``end`` None while out, ``peak``) as a frame.

    The store's ``latch_intervals`` answers them (dumped to dicts) as :func:`latch_intervals` computes them
    here from snapshots; ``is_open``, ``began_before`` (before ``start``) and ``duration_s`` (an open
    one to ``end``) are added.

    Returns:
        :data:`INTERVAL_COLUMNS`, by instance, constraint, start.
    """
    rows = []
    for it in intervals:
        began, stop = it["start"], it.get("end")
        rows.append({"instance": it["instance"], "model": it.get("model"), "constraint": it["constraint"],
                     "start": began, "end": stop,
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
        rows.append({"ts": e.ts, "instance": e.instance, "model": e.model, "constraint": found, "severity": e.severity,
                     "message": e.message})
    return pd.DataFrame(rows, columns=list(EVENT_COLUMNS))


def interval_table(intervals: pd.DataFrame, limits: Limits) -> pd.DataFrame:
    """Out-intervals as read: times (UTC), ``still out`` for an open end, duration in s, peak against its threshold.

    An end on the start's day is its time alone; on another day it carries its date too (a 7-day
    window's interval from 23:50 to 00:10 must not read as ending before it began).
    """
    out = intervals.copy()
    out["start"] = [_utc(s) for s in intervals["start"]]
    out["end"] = ["still out" if e is None or pd.isna(e) else _utc(e) if _utc(e)[:10] != _utc(s)[:10]
                  else _utc(e)[11:] for s, e in zip(intervals["start"], intervals["end"], strict=True)]
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
