"""One decision trace as plain data for the trace explorer: text summaries and pandas frames.

Pure functions, no Streamlit. Values read as text through :mod:`app.explain`, the formatting the
terminal tree shares.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd

from app.explain import (
    CHAIN_ONLY,
    DASH,
    fmt_num,
    ordered_candidates,
    outcome_text,
    selection_text,
    served_by,
    unjudged,
    violation_text,
)
from app.ui.data.fleet import NOT_SCRAPED
from app.ui.limits import Limits
from app.units import fmt
from schemas.common import EARLIEST_TIME, LATEST_TIME
from schemas.fleet import EXTERNAL, InstanceSnapshot
from schemas.trace import DecisionTrace

__all__ = [
    "ATTEMPT_COLUMNS",
    "GAUGE_COLUMNS",
    "RANKING_COLUMNS",
    "SCORE_TERM_COLUMNS",
    "STEP_COLUMNS",
    "attempts_frame",
    "headline",
    "ranking_frame",
    "rejections",
    "score_columns",
    "score_terms_frame",
    "state_frame",
    "state_table",
    "steps_frame",
    "summary",
    "ts_text",
]

STEP_COLUMNS: tuple[str, ...] = (
    "seq",
    "step",
    "kind",
    "plugin",
    "value",
    "reason",
    "kept",
    "rejected",
    "duration_us",
)
GAUGE_COLUMNS: tuple[str, ...] = (
    "queue",
    "running",
    "kv_cache_usage",
    "warmup_progress",
    "error_rate",
    "age_s",
    "stale",
)
ATTEMPT_COLUMNS: tuple[str, ...] = (
    "seq",
    "instance",
    "model",
    "status",
    "http_status",
    "error_class",
    "latency_ms",
)
SCORE_TERM_COLUMNS: tuple[str, ...] = ("instance", "term", "raw", "weight", "weighted")
RANKING_COLUMNS: tuple[str, ...] = ("instance", "model", "verdict", "rank", "total", "gap", "factor")


def ts_text(ts: datetime) -> str:
    """``ts`` in ISO 8601, said to be out of range at either end of the range a store holds.

    A time an older RouteLens stored outside 1970 .. 9999 (before the intake refused one) reads as
    the range's first instant, or its last (``ingest.duckdb.reader.shown_time``): the time shown is
    then not the one stored.
    """
    if ts <= EARLIEST_TIME:
        return f"{ts.isoformat()} (out of range: stored at this time or before it)"
    if ts >= LATEST_TIME - timedelta(microseconds=1):
        return f"{ts.isoformat()} (out of range: stored at this time or after it)"
    return ts.isoformat()


def summary(trace: DecisionTrace) -> dict[str, str]:
    """Return the headline facts of a trace as ordered ``label -> text`` pairs."""
    selected = selection_text(trace) or "none"
    if trace.fallback_triggered:
        fallback = f"yes — {trace.fallback_reason}" if trace.fallback_reason else "yes"
    else:
        fallback = "no"
    intent = trace.intent or DASH
    if trace.intent and trace.intent_confidence is not None:
        intent = f"{trace.intent} ({trace.intent_confidence:.0%})"
    return {
        "request_id": trace.request_id,
        "ts": ts_text(trace.ts),
        "selected": selected,
        "fallback": fallback,
        "mode": trace.mode.value,
        "decision_latency": f"{fmt_num(trace.latency_ms, 2)} ms",
        "outcome": outcome_text(trace),
        "rule": trace.rule or DASH,
        "intent": intent,
        "experiment_arm": (f"{trace.experiment_arm} (forced by header: left out of comparisons)"
                           if trace.experiment_arm and trace.arm_forced else trace.experiment_arm or DASH),
        "router_version": trace.router_version,
        "policy_hash": trace.policy_hash,
        "query_hash": trace.query_hash,
        "schema_version": str(trace.schema_version),
    }


def headline(trace: DecisionTrace) -> dict[str, str]:
    """Return the few short facts an operator reads first, as ``label -> value`` for metric tiles.

    Five tiles share a row (~180 px each at a 1400 px window): a value is at most ~10 characters of
    the tile's large type, else it is cut (``ok · HTT…``). The outcome reads as an HTTP status line
    (``200 ok``, ``502 error``); a duration of 10 s or more is in seconds (``66.0 s``).
    """
    out = trace.outcome
    return {
        "Fallback": "yes" if trace.fallback_triggered else "no",
        "Mode": trace.mode.value,
        "Decision latency": _tile_ms(trace.latency_ms, 2),
        "Outcome (HTTP)": f"{out.http_status} {out.status.value}",
        "Total time": _tile_ms(out.total_ms, 1),
    }


def _tile_ms(ms: float, digits: int) -> str:
    """A duration short enough for a tile: ``3,890 ms``, ``1.84 ms``; ``66.0 s`` from 10 s on."""
    return f"{fmt_num(ms, digits)} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def rejections(trace: DecisionTrace) -> dict[str, str]:
    """Map each rejected candidate's instance to its violations as readable text."""
    return {
        c.instance: "; ".join(violation_text(v) for v in c.violations) or "rejected (no violation recorded)"
        for c in ordered_candidates(trace.candidates)
        if not c.feasible
    }


def steps_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per decision step, in execution order."""
    rows = [
        {
            "seq": s.seq,
            "step": s.step,
            "kind": s.kind.value,
            "plugin": s.plugin,
            "value": s.value,
            "reason": s.reason,
            "kept": ", ".join(s.instances),
            "rejected": ", ".join(s.rejected),
            "duration_us": s.duration_us,
        }
        for s in sorted(trace.decision_trace, key=lambda s: s.seq)
    ]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))


def score_columns(trace: DecisionTrace) -> list[str]:
    """Score term names in weight order."""
    return [w.name for w in trace.score_weights]


def ranking_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One narrow row per candidate, best first: verdict, rank, total, gap to the best and the soft ramp.

    Narrow on purpose (no sideways scrolling): the terms are in :func:`score_terms_frame`, the
    gauges in :func:`state_frame`, the violations in :func:`rejections`. The verdict is ``selected``
    (``selected, not served`` when no instance served; ``served`` for another that did),
    ``feasible``, ``ruled out``, or :data:`app.explain.CHAIN_ONLY` for a rule's chain kept unjudged.
    """
    cands = ordered_candidates(trace.candidates)
    best = max((c.total for c in cands if c.total is not None), default=None)
    served, aside = served_by(trace), unjudged(trace)
    rows = [
        {
            "instance": c.instance,
            "model": c.model,
            "verdict": _verdict(trace, c.instance, c.feasible, served, aside),
            "rank": c.rank,
            "total": c.total,
            "gap": None if c.total is None or best is None else best - c.total,
            "factor": c.weight_factor,
        }
        for c in cands
    ]
    frame = pd.DataFrame(rows, columns=list(RANKING_COLUMNS))
    frame["rank"] = frame["rank"].astype("Int64")
    return frame.astype({"total": "float64", "gap": "float64", "factor": "float64"})


def _verdict(trace: DecisionTrace, instance: str, feasible: bool, served: str | None, aside: list[str]) -> str:
    if instance == trace.selected_instance:
        return "selected" if served is not None else "selected, not served"
    if instance == served:
        return "served"
    if instance in aside:
        return CHAIN_ONLY
    return "feasible" if feasible else "ruled out"


def state_frame(trace: DecisionTrace) -> pd.DataFrame:
    """The state snapshot each candidate was judged on (one compact row per candidate, best first)."""
    rows = [{"instance": c.instance, **_gauges(c.state)} for c in ordered_candidates(trace.candidates)]
    return pd.DataFrame(rows, columns=["instance", *GAUGE_COLUMNS])


def state_table(trace: DecisionTrace, limits: Limits) -> pd.DataFrame:
    """:func:`state_frame` as an operator reads it: each gauge against the limit it is judged by, in its unit.

    ``92% / 85%`` for a gauge a constraint (or ``app.health``) bounds for that candidate's model and
    instance, the value with its unit otherwise, ``—`` when the gauge was not known; age in s.
    """
    rows = []
    for c in ordered_candidates(trace.candidates):
        state = c.state
        row: dict[str, object] = {"instance": c.instance}
        for name in GAUGE_COLUMNS:
            value = None if state is None else getattr(state, name)
            if name == "stale":
                row[name] = DASH if state is None else ("yes" if value else "no")
            elif name == "age_s":
                row[name] = NOT_SCRAPED if value is None and state is not None and state.engine == EXTERNAL \
                    else fmt(value, "s")
            else:
                row[name] = limits.text(name, value, c.model, c.instance)
        rows.append(row)
    return pd.DataFrame(rows, columns=["instance", *GAUGE_COLUMNS])


def score_terms_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per (scored candidate, term), candidates best first and terms in weight order."""
    rows = [
        {"instance": cand.instance, "term": name, "raw": raw, "weight": weight, "weighted": weighted}
        for cand in ordered_candidates(trace.candidates)
        for name, raw, weight, weighted in trace.terms_of(cand)
    ]
    return pd.DataFrame(rows, columns=list(SCORE_TERM_COLUMNS)).astype(
        {"raw": "float64", "weight": "float64", "weighted": "float64"}
    )


def attempts_frame(trace: DecisionTrace) -> pd.DataFrame:
    """One row per forwarding attempt, in order."""
    rows = [
        {
            "seq": a.seq,
            "instance": a.instance,
            "model": a.model,
            "status": a.status.value,
            "http_status": a.http_status,
            "error_class": a.error_class,
            "latency_ms": a.latency_ms,
        }
        for a in sorted(trace.attempts, key=lambda a: a.seq)
    ]
    frame = pd.DataFrame(rows, columns=list(ATTEMPT_COLUMNS))
    frame["http_status"] = frame["http_status"].astype("Int64")
    return frame


def _gauges(state: InstanceSnapshot | None) -> dict[str, object]:
    if state is None:
        return dict.fromkeys(GAUGE_COLUMNS)
    return {name: getattr(state, name) for name in GAUGE_COLUMNS}

