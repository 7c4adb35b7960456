"""The Experiments page's data: two sides (arms or versions), their metric table, time series and shadow flips.

Pure functions, no Streamlit: the page fetches (``store.experiment_groups``, ``store.compare``,
``store.aggregate`` per side, a sample of traces for their shadow decisions), these shape. Rates
are shares (0-1); a bucket without requests has no rate (None), not a zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from schemas.experiments import METRICS
from schemas.queries import BucketStats

__all__ = [
    "BY_FIELD", "METRIC_COLUMNS", "METRIC_LABELS", "NO_EXPERIMENT", "SERIES_COLUMNS", "flip_matrix", "metric_table",
    "pick_sides", "series", "shadow_pairs", "shadow_summary", "srm_status",
]

BY_FIELD: dict[str, str] = {"arm": "experiment_arm", "version": "router_version"}
SERIES_COLUMNS: tuple[str, ...] = ("side", "start", "requests", "error_rate", "latency_p95_ms", "cost",
                                   "cost_per_request")
METRIC_COLUMNS: tuple[str, ...] = ("metric", "A", "B", "B - A", "CI low", "CI high", "p (Holm)", "moved", "note")
METRIC_LABELS: dict[str, str] = {
    "error_rate": "error rate", "fallback_rate": "fallback rate", "latency_p50_ms": "latency p50 (ms)",
    "latency_p95_ms": "latency p95 (ms)", "cost_per_request": "cost per request", "misroute_rate": "misroute rate",
    "quality_score": "quality score",
}
NO_EXPERIMENT = ("No two arms or versions in this window. Declare `experiments.arms` in routelens.yaml "
                 "(`routelens demo` runs one: balanced against the seed's instance score), send traffic, "
                 "then widen the window.")


def pick_sides(groups: Mapping[str, int], a: str | None, b: str | None) -> tuple[list[str], str | None, str | None]:
    """The choices (busiest first) and the two sides: the given ones when known, else the two busiest."""
    options = [name for name, _ in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))]
    side_a = a if a in groups else (options[0] if options else None)
    rest = [o for o in options if o != side_a]
    side_b = b if b in groups and b != side_a else (rest[0] if rest else None)
    return options, side_a, side_b


def metric_table(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per metric of a :class:`schemas.experiments.CompareReport` (JSON), in report order."""
    rows = []
    metrics = report.get("metrics", {})
    for name in [m for m in METRICS if m in metrics] + [m for m in metrics if m not in METRICS]:
        m = metrics[name]
        ci = m.get("ci") or (None, None)
        note = m.get("note") or ("" if m.get("enough_data", True) else "not enough data")
        rows.append({
            "metric": METRIC_LABELS.get(name, name), "A": m.get("a"), "B": m.get("b"), "B - A": m.get("delta"),
            "CI low": ci[0], "CI high": ci[1], "p (Holm)": m.get("p_adjusted"),
            "moved": bool(m.get("significant_after_correction")), "note": note,
        })
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def srm_status(report: Mapping[str, Any]) -> tuple[str, str]:
    """``(level, sentence)`` of the split check: ``error`` below p = 0.001, ``warning`` below 0.01, else ``ok``."""
    p, n_a, n_b = report.get("srm_p"), report.get("n_a", 0), report.get("n_b", 0)
    shares = report.get("shares") or (0.5, 0.5)
    split = f"{n_a:,} / {n_b:,} requests against a designed {shares[0]:g} / {shares[1]:g}"
    if p is None:
        return "warning", f"Sample ratio not checked ({split})."
    if report.get("srm_flag") or p < 0.001:
        return "error", f"Sample ratio mismatch: p = {p:.2g} ({split}); distrust the deltas."
    if p < 0.01:
        return "warning", f"Split drifting from the design: p = {p:.2g} ({split})."
    return "ok", f"Split as designed: p = {p:.2g} ({split})."


def series(per_side: Mapping[str, Iterable[BucketStats]]) -> pd.DataFrame:
    """One row per side and time bucket (:data:`SERIES_COLUMNS`), oldest first."""
    rows = [{
        "side": side, "start": b.start, "requests": b.requests,
        "error_rate": b.errors / b.requests if b.requests else None, "latency_p95_ms": b.latency_p95_ms,
        "cost": b.cost, "cost_per_request": b.cost / b.requests if b.requests else None,
    } for side, buckets in per_side.items() for b in buckets]
    frame = pd.DataFrame(rows, columns=list(SERIES_COLUMNS))
    return frame.sort_values(["side", "start"], kind="stable").reset_index(drop=True)


def shadow_pairs(traces: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Live vs shadow choice of each trace (JSON) that carries a shadow decision."""
    rows = []
    for t in traces:
        shadow = t.get("shadow")
        if not shadow:
            continue
        rows.append({
            "request_id": t.get("request_id"), "live_model": t.get("selected_model") or "(none)",
            "shadow_model": shadow.get("selected_model") or "(none)",
            "live_instance": t.get("selected_instance") or "(none)",
            "shadow_instance": shadow.get("selected_instance") or "(none)", "flipped": bool(shadow.get("flipped")),
            "shadow_version": shadow.get("router_version"),
        })
    return pd.DataFrame(rows, columns=["request_id", "live_model", "shadow_model", "live_instance",
                                       "shadow_instance", "flipped", "shadow_version"])


def flip_matrix(pairs: pd.DataFrame, level: str = "model") -> pd.DataFrame:
    """Requests by live (rows) and shadow (columns) choice, at ``model`` or ``instance`` level."""
    if pairs.empty:
        return pd.DataFrame()
    table = pd.crosstab(pairs[f"live_{level}"], pairs[f"shadow_{level}"])
    table.index.name, table.columns.name = "live", "shadow"
    return table


def shadow_summary(pairs: pd.DataFrame, sampled: int) -> str:
    """One sentence: how many of the sampled traces had a shadow decision and how many flipped."""
    if pairs.empty:
        return (f"None of the {sampled:,} newest traces carries a shadow decision; declare "
                "`experiments.shadow` in routelens.yaml to decide a candidate policy beside the live one.")
    flips = int(pairs["flipped"].sum())
    versions = ", ".join(sorted({str(v) for v in pairs["shadow_version"].dropna()})) or "?"
    return (f"{len(pairs):,} of the {sampled:,} newest traces carry a shadow decision ({versions}); "
            f"{flips:,} flipped ({flips / len(pairs):.1%}).")
