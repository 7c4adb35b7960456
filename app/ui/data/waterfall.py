"""The elimination waterfall of one decision: all candidates → after each filter → ranked → selected.

Pure: a trace in, a frame out (one row per stage). Each filter stage lists the instances it
removed with the constraint, the value and the threshold, read from the candidates' violations.
"""

from __future__ import annotations

import pandas as pd

from app.explain import violation_text
from schemas.common import StepKind
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["STAGE_COLUMNS", "waterfall_stages"]

STAGE_COLUMNS: tuple[str, ...] = ("stage", "measure", "count", "change", "removed", "detail")


def _why(cand: CandidateEval | None, constraint: str | None) -> str:
    if cand is None:
        return "no candidate record"
    hits = [v for v in cand.violations if constraint is None or v.constraint == constraint] or cand.violations
    return "; ".join(violation_text(v) for v in hits) or "no violation recorded"


def _filter_stages(trace: DecisionTrace) -> list[tuple[str, list[str], str | None]]:
    """``(stage name, removed instances, constraint)`` per filter step, or per constraint without steps."""
    steps = sorted((s for s in trace.decision_trace if s.kind == StepKind.FILTER), key=lambda s: s.seq)
    if steps:
        return [(s.step, list(s.rejected), s.step.removeprefix("filter/")) for s in steps]
    by_constraint: dict[str, list[str]] = {}
    for cand in trace.candidates:
        if not cand.feasible:
            first = next((v.constraint for v in cand.violations if v.severity == "hard"), "rejected")
            by_constraint.setdefault(first, []).append(cand.instance)
    return [(f"filter/{name}", removed, name) for name, removed in by_constraint.items()]


def waterfall_stages(trace: DecisionTrace) -> pd.DataFrame:
    """One row per stage: ``measure`` is plotly's (absolute/relative), ``change`` minus the removed count.

    ``detail`` is the hover text: per removed instance, its violation as text.
    """
    cands = {c.instance: c for c in trace.candidates}
    rows: list[dict[str, object]] = []
    count = len(trace.candidates)
    rows.append({"stage": "all candidates", "measure": "absolute", "count": count, "change": count,
                 "removed": "", "detail": ", ".join(cands) or "no candidates"})
    for name, removed, constraint in _filter_stages(trace):
        count -= len(removed)
        detail = "<br>".join(f"{i}: {_why(cands.get(i), constraint)}" for i in removed) or "removed none"
        rows.append({"stage": name, "measure": "relative", "count": count, "change": -len(removed),
                     "removed": ", ".join(removed), "detail": detail})
    ranked = sorted((c for c in trace.candidates if c.rank is not None), key=lambda c: c.rank or 0)
    rows.append({"stage": "ranked", "measure": "absolute", "count": len(ranked), "change": len(ranked),
                 "removed": "", "detail": "<br>".join(f"#{c.rank} {c.instance}" for c in ranked) or "none ranked"})
    chosen = 1 if trace.selected_instance else 0
    rows.append({"stage": "selected", "measure": "absolute", "count": chosen, "change": chosen, "removed": "",
                 "detail": trace.selected_instance or "nothing selected"})
    return pd.DataFrame(rows, columns=list(STAGE_COLUMNS))
