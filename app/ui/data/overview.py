"""The store's buckets, traffic edges and misroutes as the Overview's series, headline numbers and tables.

Pure functions, no Streamlit: the page fetches, these shape. Rates are shares (0-1); a window
without requests has no rate (None), not a zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pandas as pd

from app.ui.data.fleet import trace_link
from app.ui.timeseries import complete
from app.units import DASH, Unit, fmt, fmt_delta
from schemas.queries import BucketStats, Misroute, TrafficEdge

__all__ = [
    "MISROUTE_COLUMNS", "SEND_TRAFFIC", "SERIES_COLUMNS", "Headline", "busiest", "headlines", "misroute_rows",
    "series",
]

SERIES_COLUMNS: tuple[str, ...] = (
    "start", "requests", "errors", "error_rate", "fallbacks", "fallback_rate", "latency_p50_ms", "latency_p95_ms",
    "latency_p99_ms", "cost",
)
MISROUTE_COLUMNS: tuple[str, ...] = (
    "ts", "request_id", "selected_model", "selected_instance", "rule", "expected_model", "expected_class", "source",
    "open",
)
# What an empty store shows (README, "Using it").
SEND_TRAFFIC = '''from openai import OpenAI
client = OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused")
raw = client.chat.completions.with_raw_response.create(
    model="auto", messages=[{"role": "user", "content": "紧急：退款失败，请分类"}])
print(raw.headers["x-request-id"], raw.headers["x-routelens-instance"])'''


def series(buckets: Iterable[BucketStats], start: datetime | None = None, end: datetime | None = None,
           bucket: str | None = None) -> pd.DataFrame:
    """One row per time bucket (:data:`SERIES_COLUMNS`), oldest first; rates of empty buckets are None.

    Given the window and bucket, every bucket of the window is there (:func:`app.ui.timeseries.complete`:
    empty ones with no rate, so lines break; ``partial`` marks the still-filling last one).
    """
    rows = [{
        "start": b.start, "requests": b.requests, "errors": b.errors,
        "error_rate": b.errors / b.requests if b.requests else None, "fallbacks": b.fallbacks,
        "fallback_rate": b.fallbacks / b.requests if b.requests else None, "latency_p50_ms": b.latency_p50_ms,
        "latency_p95_ms": b.latency_p95_ms, "latency_p99_ms": b.latency_p99_ms, "cost": b.cost,
    } for b in buckets]
    frame = pd.DataFrame(rows, columns=list(SERIES_COLUMNS)).sort_values("start", ignore_index=True)
    if start is None or end is None or bucket is None:
        return frame
    return complete(frame, start, end, bucket, counts=("requests", "errors", "fallbacks"), zeros=("cost",))


@dataclass(frozen=True)
class Headline:
    """One headline number, its value in the previous window, and how to read it.

    ``delta`` is None when either window has no value; ``worse_up``: a rise is bad (errors, latency).
    """

    label: str
    value: float | None
    delta: float | None
    unit: Unit
    worse_up: bool
    help: str = ""
    previous: float | None = None
    cost_unit: str = "cost units"

    @property
    def text(self) -> str:
        """The value as shown, with its unit (``—`` without one)."""
        return fmt(self.value, self.unit, self.cost_unit)

    @property
    def delta_text(self) -> str | None:
        """The change and the value it is against: ``+1.2 pp (was 3.4%)``; None without one."""
        change = fmt_delta(self.delta, self.unit, self.cost_unit)
        if change is None:
            return None
        return f"{change} (was {fmt(self.previous, self.unit, self.cost_unit)})"


def _totals(frame: pd.DataFrame) -> dict[str, float | None]:
    requests = float(frame["requests"].sum()) if not frame.empty else 0.0
    out: dict[str, float | None] = {
        "requests": requests,
        "error_rate": float(frame["errors"].sum()) / requests if requests else None,
        "fallback_rate": float(frame["fallbacks"].sum()) / requests if requests else None,
        "cost": float(frame["cost"].sum()) if requests else None,
    }
    for q in ("latency_p50_ms", "latency_p95_ms", "latency_p99_ms"):
        known = frame[frame[q].notna() & (frame["requests"] > 0)] if not frame.empty else frame
        weight = float(known["requests"].sum()) if not known.empty else 0.0
        out[q] = float((known[q] * known["requests"]).sum()) / weight if weight else None
    return out


_HEADLINES: tuple[tuple[str, str, Unit, bool, str], ...] = (
    ("requests", "Requests", "n", False, ""),
    ("error_rate", "Error rate", "%", True, "requests whose outcome was an error"),
    ("fallback_rate", "Fallback rate", "%", True, "requests served after a fallback"),
    ("latency_p50_ms", "Latency p50", "ms", True, "request-weighted mean of the buckets' p50 (approximate)"),
    ("latency_p95_ms", "Latency p95", "ms", True, "request-weighted mean of the buckets' p95 (approximate)"),
    ("latency_p99_ms", "Latency p99", "ms", True, "request-weighted mean of the buckets' p99 (approximate)"),
    ("cost", "Cost", "cost", True, "a sum, not a mean: the recorded cost of every request in the window (fleet."
                                   "instances[].cost, in app.cost_unit), errors an instance served included; a request "
                                   "no instance served records none. The Experiments page's cost per request is a "
                                   "side's sum over all its requests (forced ones left out)"),
)


_QUANTILES = {"latency_p50_ms": "p50", "latency_p95_ms": "p95", "latency_p99_ms": "p99"}


def _own_quantiles(totals: dict[str, float | None], window: BucketStats | None) -> None:
    for key in _QUANTILES:
        totals[key] = None if window is None else getattr(window, key)


def headlines(current: pd.DataFrame, previous: pd.DataFrame, cost_unit: str = "cost units",
              windows: tuple[BucketStats | None, BucketStats | None] | None = None) -> list[Headline]:
    """The window's totals (from :func:`series` frames) with their change against the previous window.

    ``windows``: each window as one bucket (the store's ``window_stats``): the latency quantiles are
    then the window's own. Without them (a store that cannot answer) they are the request-weighted
    mean of the buckets' quantiles, which can sit far from the window's (one slow bucket's p99 is
    diluted by the others), and their help says so.
    """
    now, before = _totals(current), _totals(previous)
    if windows is not None:
        _own_quantiles(now, windows[0])
        _own_quantiles(before, windows[1])
    out = []
    for key, label, unit, worse_up, help_text in _HEADLINES:
        if key in _QUANTILES and windows is not None:
            help_text = f"the window's {_QUANTILES[key]} of its requests' total latency (errors included)"
        value, old = now[key], before[key]
        has_before = bool(before["requests"])
        delta = value - old if value is not None and old is not None and has_before else None
        out.append(Headline(label, value, delta, unit, worse_up, help_text, old if has_before else None, cost_unit))
    return out


def busiest(edges: Iterable[TrafficEdge], by: str, top: int = 5) -> pd.DataFrame:
    """The ``top`` busiest values of ``by`` (``rule``, ``model`` or ``instance``) with their requests and share."""
    totals: dict[str, int] = {}
    for edge in edges:
        name = getattr(edge, by) or "(none)"
        totals[name] = totals.get(name, 0) + edge.requests
    whole = sum(totals.values())
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    rows = [{by: name, "requests": n, "share": n / whole if whole else 0.0} for name, n in ranked]
    return pd.DataFrame(rows, columns=[by, "requests", "share"])


def misroute_rows(misroutes: Sequence[Misroute]) -> pd.DataFrame:
    """Misroutes newest first (:data:`MISROUTE_COLUMNS`), each linked to its drill-down (``/trace?request_id=``)."""
    rows = [{**m.model_dump(include=set(MISROUTE_COLUMNS)), "open": trace_link(m.request_id)}
            for m in sorted(misroutes, key=lambda m: m.ts, reverse=True)]
    frame = pd.DataFrame(rows, columns=list(MISROUTE_COLUMNS))
    return frame.fillna({c: DASH for c in MISROUTE_COLUMNS if c not in ("ts", "trace_ts")})
