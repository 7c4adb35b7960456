"""Probe results read against the running configuration's probe thresholds (:meth:`Limits.probe`).

The verdict a page colours by, the ``value / limit`` text and the tables an operator reads: no
``None``, no unrounded float. Pure, no Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from app.ui.limits import Limits
from app.ui.probe_limit import ProbeLimit
from app.units import DASH, fmt
from schemas.common import ProbeVerdict
from schemas.probe import ProbeResult

__all__ = [
    "RESULT_COLUMNS", "VERDICT_TABLE_COLUMNS", "judged", "limit_of", "limits_caption", "reading_of", "results_table",
    "verdict_of", "verdict_table",
]

VERDICT_TABLE_COLUMNS: tuple[str, ...] = (
    "instance", "model", "kind", "verdict", "value / limit", "limit", "last result", "reason", "router verdict",
    "router since", "link",
)
RESULT_COLUMNS: tuple[str, ...] = ("time", "kind", "verdict", "value / limit", "limit", "probe took", "reason", "error")


def limit_of(result: ProbeResult, limits: Limits) -> ProbeLimit | None:
    """The bound ``result``'s value is judged against under ``limits``."""
    return limits.probe(result.kind.value, baseline=result.baseline, reference=result.reference)


def verdict_of(result: ProbeResult, limits: Limits, bound: ProbeLimit | None = None) -> str:
    """``result``'s verdict against the running configuration (the prober's where the bound cannot say)."""
    lim = bound or limit_of(result, limits)
    return result.verdict.value if lim is None else lim.verdict(result.value, result.verdict.value)


def reading_of(result: ProbeResult, limits: Limits, bound: ProbeLimit | None = None) -> str:
    """``result``'s value against its bound, with its unit: ``0.310 / 0.650``, ``1,275 ms / 640–960 ms``."""
    lim = bound or limit_of(result, limits)
    return fmt(result.value, "n") if lim is None else lim.text(result.value)


def judged(results: Sequence[ProbeResult], limits: Limits) -> list[ProbeResult]:
    """``results`` with each verdict as the running configuration reads it (what bad windows are cut by)."""
    out = []
    for r in results:
        verdict = verdict_of(r, limits)
        out.append(r if verdict == r.verdict.value else r.model_copy(update={"verdict": ProbeVerdict(verdict)}))
    return out


def _when(ts: Any) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S") if isinstance(ts, datetime) and not pd.isna(ts) else DASH


def _text(value: Any) -> str:
    return value if isinstance(value, str) and value else DASH


def verdict_table(grid: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`app.ui.data.probes.last_verdicts` as read: times as text, a dash for nothing."""
    out = pd.DataFrame({
        "instance": grid["instance"], "model": grid["model"].map(_text), "kind": grid["kind"],
        "verdict": grid["verdict"], "value / limit": grid["reading"], "limit": grid["limit"].map(_text),
        "last result": grid["ts"].map(_when), "reason": grid["reason"].map(_text),
        "router verdict": grid["held"].map(_text), "router since": grid["held_since"].map(_when),
        "link": grid["link"],
    }, columns=list(VERDICT_TABLE_COLUMNS))
    return out.reset_index(drop=True)


def results_table(results: Sequence[ProbeResult], limits: Limits) -> pd.DataFrame:
    """One row per result, newest first, read against the running configuration."""
    rows = []
    for r in sorted(results, key=lambda r: r.ts, reverse=True):
        lim = limit_of(r, limits)
        rows.append({
            "time": _when(r.ts), "kind": r.kind.value, "verdict": verdict_of(r, limits, lim),
            "value / limit": reading_of(r, limits, lim), "limit": DASH if lim is None else lim.source,
            "probe took": fmt(r.latency_ms, "ms"), "reason": _text(r.reason), "error": _text(r.error_class),
        })
    return pd.DataFrame(rows, columns=list(RESULT_COLUMNS))


def limits_caption(limits: Limits) -> str:
    """Which bounds the page judges by, and from where.

    Latency is judged as the prober judges it (:mod:`probes.latency`): its p95, else its p50, off
    its baseline, or a creep over the last ``trend_window`` probes. A value shown is the p95, so a
    p95 inside its band can still read degraded; the caption says so rather than name the p95 alone.
    """
    p = limits.probes
    return (f"Judged against {limits.source}: semantic similarity ≥ {fmt(p.semantic.threshold, 'score')} "
            f"(probes.semantic.threshold, or a reference's own), latency p95 and p50 within "
            f"±{fmt(p.latency.tolerance, '%')} of their learned baselines and not creeping up over the last "
            f"{p.latency.trend_window} probes (probes.latency.tolerance, trend_window; the value shown is the p95, "
            "the reason names what was off), syntax: a valid answer.")
