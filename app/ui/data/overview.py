"""The store's buckets, traffic edges and misroutes as the Overview's series, headline numbers and tables.

Pure functions, no Streamlit: the page fetches, these shape. Rates are shares (0-1); a window
without requests has no rate (None), not a zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from app.ui.data.fleet import trace_link
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


def series(buckets: Iterable[BucketStats]) -> pd.DataFrame:
    """One row per time bucket (:data:`SERIES_COLUMNS`), oldest first; rates of empty buckets are None."""
    rows = [{
        "start": b.start, "requests": b.requests, "errors": b.errors,
        "error_rate": b.errors / b.requests if b.requests else None, "fallbacks": b.fallbacks,
        "fallback_rate": b.fallbacks / b.requests if b.requests else None, "latency_p50_ms": b.latency_p50_ms,
        "latency_p95_ms": b.latency_p95_ms, "latency_p99_ms": b.latency_p99_ms, "cost": b.cost,
    } for b in buckets]
    return pd.DataFrame(rows, columns=list(SERIES_COLUMNS)).sort_values("start", ignore_index=True)


@dataclass(frozen=True)
class Headline:
    """One headline number, its change against the previous window, and how to read it.

    ``delta`` is None when either window has no value; ``worse_up``: a rise is bad (errors, latency).
    """

    label: str
    value: float | None
    delta: float | None
    unit: str
    worse_up: bool
    help: str = ""

    @property
    def text(self) -> str:
        """The value as shown (``—`` without one)."""
        return "—" if self.value is None else _fmt(self.value, self.unit)

    @property
    def delta_text(self) -> str | None:
        """The change as shown (percentage points for shares), None without one."""
        if self.delta is None:
            return None
        sign = "+" if self.delta >= 0 else "−"
        if self.unit == "%":
            return f"{sign}{abs(self.delta) * 100:.1f} pp"
        return f"{sign}{_fmt(abs(self.delta), self.unit)}"


def _fmt(value: float, unit: str) -> str:
    if unit == "%":
        return f"{value:.1%}"
    if unit == "ms":
        return f"{value:,.0f} ms"
    if unit == "cost":
        return f"{value:,.2f}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


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


_HEADLINES: tuple[tuple[str, str, str, bool, str], ...] = (
    ("requests", "Requests", "", False, ""),
    ("error_rate", "Error rate", "%", True, "requests whose outcome was an error"),
    ("fallback_rate", "Fallback rate", "%", True, "requests served after a fallback"),
    ("latency_p50_ms", "Latency p50", "ms", True, "request-weighted mean of the buckets' p50"),
    ("latency_p95_ms", "Latency p95", "ms", True, "request-weighted mean of the buckets' p95"),
    ("latency_p99_ms", "Latency p99", "ms", True, "request-weighted mean of the buckets' p99"),
    ("cost", "Cost", "cost", True, "sum of the requests' cost"),
)


def headlines(current: pd.DataFrame, previous: pd.DataFrame) -> list[Headline]:
    """The window's totals (from :func:`series` frames) with their change against the previous window.

    Latency quantiles of a window are the request-weighted mean of its buckets' quantiles (the
    store answers quantiles per bucket; they do not add up exactly).
    """
    now, before = _totals(current), _totals(previous)
    out = []
    for key, label, unit, worse_up, help_text in _HEADLINES:
        value, old = now[key], before[key]
        has_before = bool(before["requests"])
        delta = value - old if value is not None and old is not None and has_before else None
        out.append(Headline(label, value, delta, unit, worse_up, help_text))
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
    return pd.DataFrame(rows, columns=list(MISROUTE_COLUMNS))
