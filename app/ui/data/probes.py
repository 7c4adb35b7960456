"""Probe results, router state, alerts and events as plain data for the "Probes & alerts" page.

Pure functions, no Streamlit, no I/O: the page fetches, these shape. Verdicts are strings
(``ok``, ``degraded``, ``failed``, and :data:`NO_DATA` for a kind never probed in the window), read
against the running configuration's probe thresholds (``limits``, :mod:`app.ui.data.probe_reading`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import pandas as pd
from pydantic import ValidationError

from app.ui.data.probe_reading import limit_of, reading_of, verdict_of
from app.ui.limits import Limits
from app.units import DASH
from probes.alerts.manager import EVENT_SEVERITY
from schemas.common import ProbeKind
from schemas.probe import ProbeResult, ProbeStatus
from schemas.records import RouterEvent

__all__ = [
    "ACTIVE_ALERT_COLUMNS", "DEFAULT_WINDOW", "GRID_COLUMNS", "KINDS", "LATENCY_COLUMNS", "NO_DATA",
    "RECENT_ALERT_COLUMNS", "SIMILARITY_COLUMNS", "WINDOWS", "active_alert_lines", "active_alerts",
    "held_verdicts", "instance_link", "instances_worst_first", "last_verdicts", "latency_series", "probes_link",
    "read_newest", "recent_alerts", "similarity_series", "window_span",
]

# The sidebar's windows (app.ui.sidebar.WINDOWS), so a scope carried here from another page is offered.
WINDOWS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15), "1h": timedelta(hours=1), "6h": timedelta(hours=6), "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
DEFAULT_WINDOW = "1h"
NO_DATA = "no data"
KINDS: tuple[str, ...] = tuple(k.value for k in ProbeKind)
_ALERT_MESSAGE = re.compile(r"^(firing|resolved):\s*(\S+)")
_RULE_SEVERITY = {level: rule for rule, level in EVENT_SEVERITY.items()}  # an event's level -> its alert rule's

GRID_COLUMNS: tuple[str, ...] = (
    "instance", "model", "kind", "verdict", "value", "reading", "limit", "ts", "reason", "held", "held_since", "link",
)
SIMILARITY_COLUMNS: tuple[str, ...] = ("ts", "value", "threshold", "verdict", "reading", "reference", "reason")
LATENCY_COLUMNS: tuple[str, ...] = (
    "ts", "value", "baseline", "band_low", "band_high", "threshold", "verdict", "reading", "reason",
)
ACTIVE_ALERT_COLUMNS: tuple[str, ...] = (
    "severity", "state", "name", "instance", "model", "kind", "since", "value", "summary", "description", "link",
)
RECENT_ALERT_COLUMNS: tuple[str, ...] = ("ts", "action", "rule", "instance", "model", "severity", "message", "link")


def window_span(key: str, now: datetime) -> tuple[datetime, datetime]:
    """The ``[start, end)`` of the window named ``key`` (one of :data:`WINDOWS`) ending at ``now``.

    An unknown key (a hand-edited URL) falls back to :data:`DEFAULT_WINDOW`.
    """
    return now - WINDOWS.get(key, WINDOWS[DEFAULT_WINDOW]), now


class _Timed(Protocol):
    @property
    def ts(self) -> datetime: ...


T = TypeVar("T", bound=_Timed)


def read_newest(
    fetch: Callable[[datetime, datetime], Sequence[T]], start: datetime, end: datetime, *,
    key: Callable[[T], str], page: int, max_pages: int, chunks: int = 1,
) -> tuple[list[T], datetime]:
    """Read ``[start, end)`` newest part first from a store answering at most ``page`` records, oldest first.

    The span is cut into ``chunks`` equal parts read from the newest back; each part is paged
    forward (the next page starts at the last timestamp seen; a record seen twice, same
    ``key``, counts once) until ``max_pages`` requests are spent. So a budget too small for the
    span still gives the latest records (a grid's last verdicts), never only the oldest ones.

    Returns:
        The records, oldest first, and the time from which they are complete: ``start`` when
        everything was read, later when the budget ran out (``end``: not even the newest part).
    """
    out: dict[str, T] = {}
    budget, step, complete_from = max_pages, (end - start) / max(chunks, 1), end
    for i in range(max(chunks, 1)):
        hi = end - step * i
        lo = start if i == max(chunks, 1) - 1 else max(start, hi - step)
        cursor, done = lo, False
        while budget > 0 and not done:
            budget -= 1
            got = fetch(cursor, hi)
            out.update((key(r), r) for r in got)
            done = len(got) < page
            if not done and got[-1].ts <= cursor:
                break  # more than a page shares one timestamp: paging by time cannot get past it
            cursor = got[-1].ts if got else cursor
        if not done:
            break
        complete_from = lo
    return sorted(out.values(), key=lambda r: r.ts), complete_from


def instance_link(instance: str | None, at: datetime | None = None) -> str | None:
    """The query-param link to what is behind an instance (``?instance=<id>``, ``&at=`` a moment), None without one."""
    if not instance:
        return None
    return "?" + urllib.parse.urlencode({"instance": instance, **({"at": at.isoformat()} if at else {})})


def probes_link(instance: str, window: str | None = None) -> str:
    """The link to the Probes page of ``instance`` from any page (``probes?instance=<id>&window=<w>``)."""
    return "probes?" + urllib.parse.urlencode({"instance": instance, **({"window": window} if window else {})})


def held_verdicts(state: Mapping[str, Any] | None) -> dict[tuple[str, str], ProbeStatus]:
    """The router's hysteresis verdicts, ``(instance, kind) -> ProbeStatus``, from ``GET /v1/router/state``.

    Takes the gateway's ``{"instances": [snapshot, ...]}`` and an object keyed by instance id
    alike; keys that are not snapshots (``scrape``, ``quality``, ``models``, ``cluster``) and
    statuses that do not validate are skipped, so a newer gateway never breaks the page.
    """
    if not state:
        return {}
    listed = state.get("instances")
    snaps: Iterable[Any] = listed if isinstance(listed, list) else state.values()
    out: dict[tuple[str, str], ProbeStatus] = {}
    for snap in snaps:
        if not isinstance(snap, Mapping) or not isinstance(snap.get("instance"), str):
            continue
        for raw in snap.get("probes") or []:
            try:
                status = ProbeStatus.model_validate(raw)
            except ValidationError:
                continue
            out[(snap["instance"], status.kind.value)] = status
    return out


def last_verdicts(
    results: Sequence[ProbeResult], held: Mapping[tuple[str, str], ProbeStatus] | None = None, *, limits: Limits
) -> pd.DataFrame:
    """One row per (instance, kind): the latest result's verdict, or :data:`NO_DATA`; instances by name.

    The verdict and ``reading`` (``value / limit``) are against ``limits``' probe thresholds, and
    ``limit`` names the setting. ``held`` (from :func:`held_verdicts`) adds the router's verdict and
    since when it holds; an instance the router knows but no result names still gets its rows.
    """
    held = held or {}
    latest: dict[tuple[str, str], ProbeResult] = {}
    for r in results:
        key = (r.instance, r.kind.value)
        if key not in latest or r.ts >= latest[key].ts:
            latest[key] = r
    models = {r.instance: r.model for r in results}
    names = sorted({i for i, _ in latest} | {i for i, _ in held})
    rows = []
    for name in names:
        for kind in KINDS:
            last, status = latest.get((name, kind)), held.get((name, kind))
            bound = limit_of(last, limits) if last else None
            rows.append({
                "instance": name, "model": models.get(name), "kind": kind,
                "verdict": verdict_of(last, limits, bound) if last else NO_DATA,
                "value": last.value if last else None, "reading": reading_of(last, limits, bound) if last else DASH,
                "limit": bound.source if bound else None,
                "ts": last.ts if last else None, "reason": last.reason if last else "",
                "held": status.verdict.value if status else None, "held_since": status.since if status else None,
                "link": instance_link(name),
            })
    frame = pd.DataFrame(rows, columns=list(GRID_COLUMNS))
    return frame.astype({"value": "float64"})


def instances_worst_first(grid: pd.DataFrame) -> list[str]:
    """Instances of a :func:`last_verdicts` frame, worst first (most failed, then degraded kinds), then by name.

    A kind counts by the router's held verdict where the frame has it, else by its last result (as the grid shows it).
    """
    def badness(rows: pd.DataFrame) -> tuple[int, int, int]:
        counts = rows["held"].where(rows["held"].notna() & (rows["held"] != ""), rows["verdict"]).value_counts()
        return (-int(counts.get("failed", 0)), -int(counts.get("degraded", 0)), -int(counts.get(NO_DATA, 0)))

    keyed = [(badness(rows), str(name)) for name, rows in grid.groupby("instance", sort=True)]
    return [name for _, name in sorted(keyed)]


def _series(results: Sequence[ProbeResult], instance: str, kind: ProbeKind) -> list[ProbeResult]:
    return sorted((r for r in results if r.instance == instance and r.kind == kind), key=lambda r: r.ts)


def similarity_series(results: Sequence[ProbeResult], instance: str, *, limits: Limits) -> pd.DataFrame:
    """The semantic probe of ``instance`` over time: lowest-margin cosine per round and its threshold in ``limits``."""
    rows = []
    for r in _series(results, instance, ProbeKind.SEMANTIC):
        bound = limit_of(r, limits)
        rows.append({"ts": r.ts, "value": r.value, "threshold": bound.low if bound else None,
                     "verdict": verdict_of(r, limits, bound), "reading": reading_of(r, limits, bound),
                     "reference": r.reference or DASH, "reason": r.reason})
    return pd.DataFrame(rows, columns=list(SIMILARITY_COLUMNS)).astype({"value": "float64", "threshold": "float64"})


def latency_series(results: Sequence[ProbeResult], instance: str, *, limits: Limits) -> pd.DataFrame:
    """The latency probe of ``instance`` over time: window p95 (ms), learned baseline and its ±band.

    The band is ``baseline × (1 ± probes.latency.tolerance)`` of the running configuration
    (``limits``); none while the baseline is still learned.
    """
    rows = []
    for r in _series(results, instance, ProbeKind.LATENCY):
        bound = limit_of(r, limits)
        low, high = (bound.low, bound.high) if bound else (None, None)
        rows.append({
            "ts": r.ts, "value": r.value, "baseline": r.baseline, "band_low": low, "band_high": high,
            "threshold": high, "verdict": verdict_of(r, limits, bound), "reading": reading_of(r, limits, bound),
            "reason": r.reason,
        })
    floats = {c: "float64" for c in ("value", "baseline", "band_low", "band_high", "threshold")}
    return pd.DataFrame(rows, columns=list(LATENCY_COLUMNS)).astype(floats)


def active_alerts(payload: Mapping[str, Any] | None) -> pd.DataFrame:
    """The alerts ``GET /v1/alerts`` reports, firing before pending, then by severity and name."""
    alerts = [a for a in (payload or {}).get("alerts") or [] if isinstance(a, Mapping)]
    rows = [{**{c: a.get(c) for c in ACTIVE_ALERT_COLUMNS}, "link": instance_link(a.get("instance"))} for a in alerts]
    frame = pd.DataFrame(rows, columns=list(ACTIVE_ALERT_COLUMNS))
    if frame.empty:
        return frame
    order = {"firing": 0, "pending": 1}, {"critical": 0, "warning": 1, "info": 2}
    keys = frame["state"].map(order[0]).fillna(9) * 10 + frame["severity"].map(order[1]).fillna(9)
    return frame.assign(_k=keys).sort_values(["_k", "name"], kind="stable").drop(columns="_k").reset_index(drop=True)


def active_alert_lines(frame: pd.DataFrame, window: str | None = None) -> list[str]:
    """One markdown line per row of :func:`active_alerts`: state, rule, severity, linked instance, summary.

    The instance links to its Probes page (:func:`probes_link`, keeping ``window``) from any page.
    """
    lines = []
    for row in frame.to_dict("records"):
        inst = row["instance"] if isinstance(row["instance"], str) and row["instance"] else None
        where = f" on [`{inst}`]({probes_link(inst, window)})" if inst else ""
        colour = "red" if row["state"] == "firing" else "orange"
        summary = row["summary"] if isinstance(row["summary"], str) else ""
        lines.append(f"- :{colour}[**{str(row['state']).upper()}**] **{row['name']}** ({row['severity']}){where}"
                     + (f": {summary}" if summary else ""))
    return lines


def recent_alerts(events: Sequence[RouterEvent]) -> pd.DataFrame:
    """Alert events (kind ``alert``), newest first: ``firing: <Rule> ...`` / ``resolved: <Rule> ...`` split.

    ``severity`` is the alert rule's (critical, warning, info), as the active alerts show it: a
    firing event stores its rule's as an event level (critical as ``error``), read back here; a
    resolved one stores ``info``, so it takes the severity of its alert's firing in the list (``—``
    when that fell outside it).
    """
    rows = []
    fired: dict[tuple[str, str | None], str] = {}  # (rule, instance) -> the rule's severity, as last fired
    for e in sorted((e for e in events if e.kind == "alert"), key=lambda e: e.ts):
        found = _ALERT_MESSAGE.match(e.message)
        action, rule = found.groups() if found else ("", "")
        if action == "resolved":
            severity = fired.pop((rule, e.instance), DASH)
        else:
            severity = fired[(rule, e.instance)] = _RULE_SEVERITY.get(e.severity, e.severity)
        rows.append({"ts": e.ts, "action": action, "rule": rule, "instance": e.instance, "model": e.model,
                     "severity": severity, "message": e.message, "link": instance_link(e.instance, e.ts)})
    return pd.DataFrame(rows[::-1], columns=list(RECENT_ALERT_COLUMNS))
