"""The Experiments page's data: two sides (arms or versions), their metric table, time series and shadow flips.

Pure functions, no Streamlit: the page fetches (``store.experiment_groups``, ``store.compare``,
``store.experiment_series``, a sample of traces for their shadow decisions), these shape. Rates
are shares (0-1); a bucket without requests has no rate (None), not a zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from app.cli.compare import UNKNOWN_SHARES
from app.ui.timeseries import complete
from app.units import DASH, Unit, count, fmt, fmt_delta
from schemas.experiments import METRICS
from schemas.queries import BucketStats

__all__ = [
    "BY_FIELD", "FIGURES_NOTE", "METRIC_COLUMNS", "METRIC_LABELS", "METRIC_UNITS", "NO_EXPERIMENT", "SERIES_COLUMNS",
    "first_start", "flip_counts", "flip_matrix", "metric_table", "missing_sides", "pick_sides", "series",
    "shadow_pairs", "shadow_summary", "srm_status",
]

BY_FIELD: dict[str, str] = {"arm": "experiment_arm", "version": "router_version"}
SERIES_COLUMNS: tuple[str, ...] = ("side", "start", "requests", "error_rate", "latency_p95_ms", "cost",
                                   "cost_per_request")
METRIC_COLUMNS: tuple[str, ...] = ("metric", "A", "B", "B - A", "CI low", "CI high", "p (Holm)", "moved", "note")
METRIC_LABELS: dict[str, str] = {
    "error_rate": "error rate", "fallback_rate": "fallback rate", "latency_p50_ms": "latency p50",
    "latency_p95_ms": "latency p95", "cost_per_request": "cost per request", "misroute_rate": "misroute rate",
    "quality_score": "quality score",
}
METRIC_UNITS: dict[str, Unit] = {
    "error_rate": "%", "fallback_rate": "%", "latency_p50_ms": "ms", "latency_p95_ms": "ms",
    "cost_per_request": "cost", "misroute_rate": "%", "quality_score": "%",
}
FIGURES_NOTE = (
    "Cost per request is a mean over every request of a side (forced ones left out): its cost sum, the sum the "
    "Overview shows, over its requests; a request no instance served records no cost and counts 0. The table and "
    "the series count it alike. Latency p50/p95 are the requests' own quantiles (as the Overview's over the "
    "traces), their interval a bootstrap on log bins. Misroute rate and quality read one verdict per request "
    "(the first one; a later one is quarantined).")
"""What the metric table's and the series' figures are (shown under the table)."""
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


def missing_sides(groups: Mapping[str, int], a: str | None, b: str | None, by: str = "arm") -> str | None:
    """What a link's ``a``/``b`` named that the window has no requests of (None: both found, or not given)."""
    gone = [f"`{name}`" for name in dict.fromkeys((a, b)) if name and name not in groups]
    if not gone:
        return None
    return (f"No requests of {by} {' or '.join(gone)} in this window: showing the busiest {by}s instead "
            "(widen the window, or check the name).")


def metric_table(report: Mapping[str, Any], cost_unit: str = "cost units") -> pd.DataFrame:
    """One row per metric of a :class:`schemas.experiments.CompareReport` (JSON), in report order.

    Every figure reads in its metric's unit (shares as %, differences of shares in pp, latencies
    in ms, cost in ``cost_unit``); a missing one reads ``—``.
    """
    rows = []
    metrics = report.get("metrics", {})
    for name in [m for m in METRICS if m in metrics] + [m for m in metrics if m not in METRICS]:
        m = metrics[name]
        ci = m.get("ci") or (None, None)
        note = m.get("note") or ("" if m.get("enough_data", True) else "not enough data")
        unit = METRIC_UNITS.get(name, "n")
        p = m.get("p_adjusted")
        rows.append({
            "metric": METRIC_LABELS.get(name, name), "A": fmt(m.get("a"), unit, cost_unit),
            "B": fmt(m.get("b"), unit, cost_unit), "B - A": fmt_delta(m.get("delta"), unit, cost_unit) or DASH,
            "CI low": fmt_delta(ci[0], unit, cost_unit) or DASH, "CI high": fmt_delta(ci[1], unit, cost_unit) or DASH,
            "p (Holm)": DASH if p is None else f"{p:.2g}",
            "moved": "yes" if m.get("significant_after_correction") else "", "note": note,
        })
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))


def srm_status(report: Mapping[str, Any]) -> tuple[str, str]:
    """``(level, sentence)`` of the split check: ``error`` below p = 0.001, ``warning`` below 0.01, else ``ok``.

    ``info`` when the designed shares were not known (the verdict says
    :data:`app.cli.compare.UNKNOWN_SHARES`): 50/50 was assumed, and no split is a mismatch of it.
    """
    level, sentence = _split_status(report)
    forced_a, forced_b = report.get("forced_a", 0), report.get("forced_b", 0)
    if forced_a or forced_b:  # dyed onto an arm by header: in no figure (see the verdict)
        sentence += f" Forced onto an arm by header and left out: {forced_a:,} / {forced_b:,}."
    return level, sentence


def _split_status(report: Mapping[str, Any]) -> tuple[str, str]:
    p, n_a, n_b = report.get("srm_p"), report.get("n_a", 0), report.get("n_b", 0)
    if UNKNOWN_SHARES in str(report.get("verdict", "")):
        against = "" if p is None else f"; p = {p:.2g} against an even split"
        return "info", (f"Designed shares unknown, assumed 50/50: {n_a:,} / {n_b:,} requests{against}, not checked. "
                        "The arms' shares in `experiments.arms` of the configuration the app reads "
                        "(`ROUTELENS_CONFIG`, else `routelens.yaml`) make it a check.")
    shares = report.get("shares") or (0.5, 0.5)
    split = f"{n_a:,} / {n_b:,} requests against a designed {shares[0]:g} / {shares[1]:g}"
    if p is None:
        return "warning", f"Sample ratio not checked ({split})."
    if report.get("srm_flag") or p < 0.001:
        return "error", f"Sample ratio mismatch: p = {p:.2g} ({split}); distrust the deltas."
    if p < 0.01:
        return "warning", f"Split drifting from the design: p = {p:.2g} ({split})."
    return "ok", f"Split as designed: p = {p:.2g} ({split})."


def series(per_side: Mapping[str, Iterable[BucketStats]], start: datetime | None = None,
           end: datetime | None = None, bucket: str | None = None) -> pd.DataFrame:
    """One row per side and time bucket (:data:`SERIES_COLUMNS`), oldest first.

    ``cost_per_request`` is the bucket's cost sum over its requests, as the metric table's (:data:`FIGURES_NOTE`).

    Given the window and bucket, each side has every bucket of it (:func:`app.ui.timeseries.complete`:
    an empty one has no rate, so its line breaks; ``partial`` marks the still-filling last one).
    """
    parts = []
    for side, buckets in per_side.items():
        rows = [{
            "side": side, "start": b.start, "requests": b.requests,
            "error_rate": b.errors / b.requests if b.requests else None, "latency_p95_ms": b.latency_p95_ms,
            "cost": b.cost, "cost_per_request": b.cost / b.requests if b.requests else None,
        } for b in buckets]
        frame = pd.DataFrame(rows, columns=list(SERIES_COLUMNS))
        if start is not None and end is not None and bucket is not None:
            frame = complete(frame.drop(columns="side"), start, end, bucket, counts=("requests",), zeros=("cost",))
            frame.insert(0, "side", side)
        parts.append(frame)
    if not parts:
        return pd.DataFrame(columns=list(SERIES_COLUMNS))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["side", "start"], kind="stable").reset_index(drop=True)


def first_start(per_side: Mapping[str, Iterable[BucketStats]]) -> datetime | None:
    """The start of the earliest bucket with requests on either side (None: no traffic)."""
    starts = [b.start for buckets in per_side.values() for b in buckets if b.requests]
    return min(starts) if starts else None


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


def flip_counts(pairs: pd.DataFrame) -> dict[str, int]:
    """How many sampled pairs changed model, changed only instance, and kept both (they sum to the pairs)."""
    if pairs.empty:
        return {"model": 0, "instance": 0, "same": 0}
    model = pairs["live_model"] != pairs["shadow_model"]
    instance = ~model & (pairs["live_instance"] != pairs["shadow_instance"])
    return {"model": int(model.sum()), "instance": int(instance.sum()), "same": int((~model & ~instance).sum())}


def shadow_summary(pairs: pd.DataFrame, sampled: int) -> str:
    """One sentence whose counts are the grids': pairs with a shadow decision, model changes, instance-only changes.

    The model grid's off-diagonal cells sum to the model changes; the instance grid's to both kinds.
    """
    if pairs.empty:
        return (f"No shadow decision in the {count(sampled, 'newest trace')}; declare "
                "`experiments.shadow` in routelens.yaml to decide a candidate policy beside the live one.")
    flips = flip_counts(pairs)
    n = len(pairs)
    versions = ", ".join(sorted({str(v) for v in pairs["shadow_version"].dropna()})) or DASH
    changed = flips["model"] + flips["instance"]
    return (f"{n:,} of the {count(sampled, 'newest trace')} carry a shadow decision ({versions}): "
            f"{changed:,} would have gone elsewhere ({changed / n:.1%}): {count(flips['model'], 'model change')} "
            f"(off the diagonal of the model grid) and {count(flips['instance'], 'instance-only change')} "
            f"(same model, another instance); {flips['same']:,} the same.")
