"""Instance snapshots as the fleet health grid: one cell per (model, instance), green / yellow / red / grey.

Pure functions, no Streamlit: the page fetches (live ``GET /v1/router/state``, or stored snapshots
for a past moment), these shape. A cell takes the colour of its worst metric against
:class:`schemas.config.HealthThresholds`; a stale state is grey whatever its values (old numbers
are not health). An ``engine: external`` instance (a server without ``/metrics``) is never scraped
by design: it is not stale, its tile reads "not scraped (external)" and its state age says so.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pandas as pd
from pydantic import ValidationError

from app.reader import READ_TOKEN_ENV, api_from_env
from app.ui.limits import STATUS_RANK, Limits
from app.units import DASH, METRIC_NAMES, fmt
from app.violation_text import holds
from schemas.config import AppSettings, HealthBand, HealthThresholds
from schemas.fleet import EXTERNAL, InstanceSnapshot, LatchState

__all__ = [
    "CELL_COLUMNS", "LIVE_ENV", "METRICS", "NOT_SCRAPED", "SERIES_COLUMNS", "SETTINGS_ENV", "SHORT", "STATUSES",
    "TRANSITION_COLUMNS", "at_moment", "band_of", "cells", "elsewhere", "floor_time", "instance_series",
    "latch_transitions", "live_api", "live_snapshots", "offset_label", "offsets", "read_back",
    "served_rows", "table", "thresholds_from_env", "trace_link",
]

SETTINGS_ENV = "ROUTELENS_APP_SETTINGS"  # AppSettings as JSON, handed over by ``routelens app``
LIVE_ENV = "ROUTELENS_LIVE_URL"  # a gateway's live views while the store is a file
STATUSES = ("green", "yellow", "red", "grey")
NOT_SCRAPED = "not scraped (external)"  # an external instance's state age: there is no scrape to be old
# The metrics a tile can show, each judged against its limit (app.ui.limits).
METRICS: tuple[str, ...] = ("kv_cache_usage", "queue", "error_rate", "ttft_p95_ms")
SHORT: dict[str, str] = {"kv_cache_usage": "kv", "queue": "queue", "error_rate": "errors", "ttft_p95_ms": "p95 TTFT"}
CELL_COLUMNS: tuple[str, ...] = (
    "model", "instance", "status", "shown", "label", "worst", "worst_status", "age_s", *METRICS,
    *(f"{m}_text" for m in METRICS), "p95_latency_ms", "latched", "link", "external",
)


def thresholds_from_env(environ: Mapping[str, str] | None = None) -> tuple[HealthThresholds, str | None]:
    """The grid's thresholds from :data:`SETTINGS_ENV` (defaults when unset), and a problem, if any."""
    raw = (os.environ if environ is None else environ).get(SETTINGS_ENV, "").strip()
    if not raw:
        return HealthThresholds(), None
    try:
        return AppSettings.model_validate_json(raw).health, None
    except ValidationError as exc:
        return HealthThresholds(), f"{SETTINGS_ENV} is not valid app settings ({exc.error_count()} errors)"


def live_api(environ: Mapping[str, str] | None = None) -> tuple[str, str | None] | None:
    """The gateway whose live views (``/v1/router/state``, ``/v1/alerts``) the app reads, as ``(url, token)``.

    :data:`LIVE_ENV` when set (a gateway even while the store is a file), else the server the
    store is read from (:func:`app.reader.api_from_env`); None: a file and no gateway.
    """
    env = os.environ if environ is None else environ
    url = env.get(LIVE_ENV, "").strip().rstrip("/")
    if url:
        return url, env.get(READ_TOKEN_ENV, "").strip() or None
    return api_from_env(env)


def floor_time(ts: datetime, seconds: int) -> datetime:
    """``ts`` rounded down to a multiple of ``seconds`` since the epoch (a window end that caches between reruns)."""
    epoch = datetime(1970, 1, 1, tzinfo=ts.tzinfo)
    return ts - (ts - epoch) % timedelta(seconds=seconds)


def trace_link(request_id: str) -> str:
    """The drill-down of one request."""
    return "/trace?" + urllib.parse.urlencode({"request_id": request_id})


def band_of(value: float | None, band: HealthBand) -> str | None:
    """``green``, ``yellow`` (at or above ``band.yellow``) or ``red`` (at or above ``band.red``); None: no value."""
    if value is None:
        return None
    return "red" if value >= band.red else "yellow" if value >= band.yellow else "green"


def live_snapshots(state: Mapping[str, Any] | None) -> list[InstanceSnapshot]:
    """The snapshots of ``GET /v1/router/state`` (``{"instances": [...]}``); invalid entries are skipped."""
    listed = (state or {}).get("instances")
    out = []
    for item in listed if isinstance(listed, list) else []:
        try:
            out.append(InstanceSnapshot.model_validate(item))
        except ValidationError:
            continue  # a newer gateway's shape must not break the page
    return out


def at_moment(snapshots: Iterable[InstanceSnapshot], moment: datetime) -> list[InstanceSnapshot]:
    """The latest snapshot of each instance scraped at or before ``moment`` (input oldest first)."""
    latest: dict[str, InstanceSnapshot] = {}
    for snap in snapshots:
        when = snap.scraped_at
        if when is not None and when > moment:
            continue
        held = latest.get(snap.instance)
        if held is None or held.scraped_at is None or (when is not None and when >= held.scraped_at):
            latest[snap.instance] = snap
    return sorted(latest.values(), key=lambda s: (s.model, s.instance))


def read_back(
    fetch: Callable[[datetime, datetime], Sequence[InstanceSnapshot]], moment: datetime, *,
    expected: Iterable[str] = (), steps: Sequence[timedelta] = (timedelta(seconds=15), timedelta(minutes=2)),
) -> list[InstanceSnapshot]:
    """Snapshots just before ``moment``, reading further back only while an ``expected`` instance has none.

    A store answers a bounded page oldest first: one wide read of a busy fleet would give only the
    oldest snapshots. Each step is a wider span ending where the previous began (``[moment -
    step, moment]``, end inclusive); the read stops when every expected instance was seen.
    """
    end, want = moment + timedelta(microseconds=1), set(expected)
    out: list[InstanceSnapshot] = []
    for step in steps:
        start = moment - step
        got = list(fetch(start, end))
        out = got + out
        if want <= {s.instance for s in out} and out:
            break
        end = start
    return out


def _age(snap: InstanceSnapshot, moment: datetime | None) -> float | None:
    if moment is None or snap.scraped_at is None:
        return snap.age_s
    return max(0.0, (moment - snap.scraped_at).total_seconds())


def _cell(snap: InstanceSnapshot, limits: Limits, metric: str, moment: datetime | None) -> dict[str, Any]:
    age = _age(snap, moment)
    values = {m: getattr(snap, m) for m in METRICS}
    texts = {f"{m}_text": limits.text(m, v, snap.model, snap.instance) for m, v in values.items()}
    graded = {m: (st, _ratio(limits, m, v, snap)) for m, v in values.items()
              if (st := limits.status(m, v, snap.model, snap.instance)) is not None}
    worst = max(graded, key=lambda m: (STATUS_RANK[graded[m][0]], graded[m][1]), default=None)
    latched = ", ".join(latch.constraint for latch in snap.latches if latch.out)
    external = snap.scraped_at is None and snap.engine == EXTERNAL  # never scraped, by design
    stale = snap.stale or (snap.scraped_at is None and not external) or (
        age is not None and age > limits.health.stale_after_s)
    shown = graded.get(metric, (None, 0.0))[0]
    if stale:
        status = "grey"
        label = "no scrape" if snap.scraped_at is None else f"stale {age:.0f} s" if age is not None else "stale"
    else:
        # Held out by the router: red whatever the shown metric says (the tile must not read green).
        # An external instance has no KV share to show: its colour is then its worst graded metric.
        status = "red" if latched else shown or (graded[worst][0] if external and worst else "grey")
        label = f"{SHORT[metric]} {texts[metric + '_text']}" + (f"<br>out: {latched}" if latched else "")
        if external:
            label += f"<br>{NOT_SCRAPED}"
    return {"model": snap.model, "instance": snap.instance, "status": status, "shown": metric, "label": label,
            "worst": worst, "worst_status": graded[worst][0] if worst else None, "age_s": age, **values, **texts,
            "p95_latency_ms": snap.p95_latency_ms,
            "latched": latched, "link": "?" + urllib.parse.urlencode({"instance": snap.instance}), "external": external}


def _ratio(limits: Limits, metric: str, value: float | None, snap: InstanceSnapshot) -> float:
    """How far ``value`` is towards its threshold (ties between colours go to the furthest)."""
    lim = limits.limit(metric, snap.model, snap.instance)
    if lim is None or value is None or not lim.threshold:
        return 0.0
    return value / lim.threshold if lim.op in ("<=", "<") else lim.threshold / value if value else float("inf")


def cells(
    snapshots: Iterable[InstanceSnapshot], limits: Limits, *, metric: str = METRICS[0],
    moment: datetime | None = None, known: Iterable[tuple[str, str]] = (),
) -> pd.DataFrame:
    """One row per (model, instance): its colour and label for ``metric``, and every metric against its limit.

    A tile shows one metric (``metric``, as ``value / limit``) and takes that metric's colour
    against the limit the configuration sets (:class:`app.ui.limits.Limits`: the constraint the
    router removes by, else ``app.health``); an instance a latch holds out is red whatever the
    metric, and a stale one grey. ``worst`` names the metric furthest past its limit.

    Args:
        snapshots: One per instance (live state, or :func:`at_moment`'s choice).
        limits: The running configuration's limits.
        metric: The metric the tiles show (one of :data:`METRICS`).
        moment: When the grid is shown: ages are counted to it (None: the snapshots' own ``age_s``).
        known: ``(model, instance)`` pairs to show grey when no snapshot names them.
    """
    rows = [_cell(s, limits, metric, moment) for s in snapshots]
    seen = {r["instance"] for r in rows}
    for model, instance in known:
        if instance not in seen:
            seen.add(instance)
            rows.append({"model": model, "instance": instance, "status": "grey", "shown": metric, "worst": None,
                         "label": "no snapshot", "latched": "", "external": False,
                         "link": "?" + urllib.parse.urlencode({"instance": instance})})
    frame = pd.DataFrame(rows, columns=list(CELL_COLUMNS))
    return frame.sort_values(["model", "instance"], ignore_index=True)


def elsewhere(grid: pd.DataFrame) -> list[str]:
    """Fresh instances red on a metric other than the one the tiles show, as ``inst (queue 12 / 10 requests)``."""
    if grid.empty:
        return []
    other = grid[(grid["worst_status"] == "red") & (grid["worst"] != grid["shown"]) & (grid["status"] != "grey")]
    return [f"{r['instance']} ({SHORT[r['worst']]} {r[r['worst'] + '_text']})" for _, r in other.iterrows()]


def table(grid: pd.DataFrame) -> pd.DataFrame:
    """The grid as a table an operator reads: each metric as ``value / limit``, no raw floats, no None."""
    out = grid[["model", "instance", "status", "latched", *(f"{m}_text" for m in METRICS), "age_s", "link"]].copy()
    out = out.rename(columns={f"{m}_text": METRIC_NAMES[m] for m in METRICS})
    external = [pd.notna(e) and bool(e) for e in grid["external"]]
    out["age_s"] = [NOT_SCRAPED if ext else fmt(a, "s") for a, ext in zip(grid["age_s"], external, strict=True)]
    out["latched"] = grid["latched"].fillna("")
    return out.rename(columns={"age_s": "state age", "latched": "held out by"}).fillna(DASH)


SERIES_COLUMNS: tuple[str, ...] = ("ts", "kv_cache_usage", "queue", "error_rate", "ttft_p95_ms", "p95_latency_ms")
TRANSITION_COLUMNS: tuple[str, ...] = ("ts", "source", "what", "detail")


def instance_series(snapshots: Iterable[InstanceSnapshot]) -> pd.DataFrame:
    """The metrics of one instance over time (:data:`SERIES_COLUMNS`), by scrape time; unscraped ones left out."""
    rows = [{"ts": s.scraped_at, **{c: getattr(s, c) for c in SERIES_COLUMNS[1:]}}
            for s in snapshots if s.scraped_at is not None]
    frame = pd.DataFrame(rows, columns=list(SERIES_COLUMNS))
    return frame.drop_duplicates("ts").sort_values("ts", ignore_index=True)


def latch_transitions(
    snapshots: Iterable[InstanceSnapshot], events: Iterable[Any] = (), limits: Limits | None = None,
) -> pd.DataFrame:
    """When each latch went out or came back (from the snapshots' latches), with the instance's router events.

    A latch's ``since`` is when it last changed, so each distinct ``(constraint, since, out)`` is one
    transition. Events are anything with ``ts``, ``kind``, ``message`` (``RouterEvent``). A value
    reads against its constraint's threshold when ``limits`` knows the constraint (``92% / 85%``).
    """
    seen: dict[tuple[str, datetime, bool], dict[str, Any]] = {}
    for snap in snapshots:
        for latch in snap.latches:
            if latch.since is None:
                continue
            value = "" if latch.value is None else f" ({_latch_value(latch, limits)})"
            seen.setdefault((latch.constraint, latch.since, latch.out), {
                "ts": latch.since, "source": "latch", "what": f"{latch.constraint} {'out' if latch.out else 'back in'}",
                "detail": f"held out of the feasible set{value}" if latch.out else f"feasible again{value}"})
    rows = list(seen.values()) + [{"ts": e.ts, "source": "event", "what": e.kind, "detail": e.message}
                                  for e in events]
    frame = pd.DataFrame(rows, columns=list(TRANSITION_COLUMNS))
    return frame.sort_values("ts", ignore_index=True)


def _latch_value(latch: LatchState, limits: Limits | None) -> str:
    """A latch's recorded value: against its threshold, and said as read later when it no longer breaks it.

    The value is the latest evaluation's when the snapshot was stored, which may be seconds after the
    one that broke the latch: a queue spike may be over (``0 / 10``), and shown bare it would read as
    what broke it.
    """
    if limits is None:
        return f"value {latch.value:.3g}"
    text = limits.latch_text(latch.constraint, latch.value)
    spec = limits.constraint(latch.constraint)
    if latch.out and latch.value is not None and spec is not None and holds(spec.op, latch.value, spec.threshold):
        return f"{text} when stored, within the limit again: it broke it before"
    return text


def served_rows(items: Iterable[Any]) -> pd.DataFrame:
    """Search results (``TraceSummary``) as rows linked to their drill-down."""
    rows = [{"ts": t.ts, "request_id": t.request_id, "model": t.selected_model, "rule": t.rule,
             "outcome": t.outcome_status.value, "http": t.http_status, "total": fmt(t.total_ms, "ms"),
             "fallback": "yes" if t.fallback_triggered else "", "open": trace_link(t.request_id)} for t in items]
    frame = pd.DataFrame(rows, columns=["ts", "request_id", "model", "rule", "outcome", "http", "total",
                                        "fallback", "open"])
    return frame.fillna({"model": DASH, "rule": DASH})


def offsets(span: timedelta, steps: int = 30) -> list[int]:
    """The time slider's stops, in seconds before the window's end: the window's start first, ``0`` (now) last."""
    whole = int(span.total_seconds())
    return sorted({round(whole * i / steps) for i in range(steps + 1)}, reverse=True)


def offset_label(seconds: int) -> str:
    """A slider stop as read: ``now``, ``−45s``, ``−14m 30s``, ``−30m``, ``−5h 30m``, ``−2d 6h``.

    The remainder in the next unit is kept (``−14m 30s``, not ``−14m``): the 15-minute window's
    stops are 30 s apart, and two stops must never read alike.
    """
    if seconds <= 0:
        return "now"
    if seconds < 120:
        return f"−{seconds}s"
    minutes, hours = seconds // 60, seconds // 3600
    if seconds < 2 * 3600:
        return f"−{minutes}m" + (f" {seconds % 60}s" if seconds % 60 else "")
    if seconds < 2 * 86400:
        return f"−{hours}h" + (f" {minutes % 60}m" if minutes % 60 else "")
    return f"−{hours // 24}d" + (f" {hours % 24}h" if hours % 24 else "")
