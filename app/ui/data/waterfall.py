"""The elimination waterfall of one decision: all candidates → the rule's target → each filter → ranked → selected.

Pure: a trace in, a frame out (one row per stage). Each filter stage lists the instances it
removed with the constraint, the value and the threshold, read from the candidates' violations.

The counts are the trace's: a matched rule keeps only its target's instances for the filters
(``the rule's target``); the models of its chain listed after them were not filtered or scored
(:func:`app.explain.unjudged`), so they are not counted through the filters nor as ranked. A level
filtered after an empty one (the chain's next model, the fallback model) is a stage of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from app.explain import served_by, unjudged, unserved_text, violation_text
from schemas.common import StepKind
from schemas.trace import CandidateEval, DecisionStep, DecisionTrace

__all__ = ["STAGE_COLUMNS", "waterfall_stages"]

STAGE_COLUMNS: tuple[str, ...] = ("stage", "measure", "count", "change", "removed", "detail")
_KEPT = re.compile(r"\bkept (?P<kept>\d+), rejected (?P<rejected>\d+)\b")


@dataclass(slots=True)
class _Round:
    """One pass of the filters over one level: how many entered (None: not recorded), the step before it."""

    entering: int | None
    before: DecisionStep | None
    stages: list[tuple[str, list[str], str | None]] = field(default_factory=list)


def _why(cand: CandidateEval | None, constraint: str | None) -> str:
    if cand is None:
        return "no candidate record"
    hits = [v for v in cand.violations if constraint is None or v.constraint == constraint] or cand.violations
    return "; ".join(violation_text(v) for v in hits) or "no violation recorded"


def _entering(step: DecisionStep) -> int | None:
    """How many candidates a filter step judged: its ``kept N, rejected M``, or its kept and rejected lists."""
    if (m := _KEPT.search(step.reason)) is not None:
        return int(m["kept"]) + int(m["rejected"])
    if step.instances:
        return len(step.instances) + len(step.rejected)
    return None


def _rounds(trace: DecisionTrace) -> list[_Round]:
    """The filter steps in passes (a step of another kind between two filters starts a new pass).

    Without filter steps, one pass of the removals grouped by their first hard constraint.
    """
    passes: list[tuple[DecisionStep | None, list[DecisionStep]]] = []
    before: DecisionStep | None = None
    previous_was_filter = False
    for s in sorted(trace.decision_trace, key=lambda s: s.seq):
        if s.kind is not StepKind.FILTER:
            before, previous_was_filter = s, False
            continue
        if not previous_was_filter:
            passes.append((before, []))
        passes[-1][1].append(s)
        previous_was_filter = True
    rounds = []
    for before, steps in passes:
        removed_before, entering = 0, None
        for s in steps:  # the first step that says how many it judged, plus what the steps before it removed
            if (judged := _entering(s)) is not None:
                entering = judged + removed_before
                break
            removed_before += len(s.rejected)
        rounds.append(_Round(entering, before, [(s.step, list(s.rejected), s.step.removeprefix("filter/"))
                                                for s in steps]))
    if rounds:
        return rounds
    by_constraint: dict[str, list[str]] = {}
    for cand in trace.candidates:
        if not cand.feasible:
            first = next((v.constraint for v in cand.violations if v.severity == "hard"), "rejected")
            by_constraint.setdefault(first, []).append(cand.instance)
    return [_Round(None, None, [(f"filter/{name}", removed, name) for name, removed in by_constraint.items()])]


def _row(stage: str, measure: str, count: int, change: int, removed: str, detail: str) -> dict[str, object]:
    return {"stage": stage, "measure": measure, "count": count, "change": change, "removed": removed,
            "detail": detail}


def _rule_stage(trace: DecisionTrace, first: _Round | None, aside: list[str]) -> dict[str, object] | None:
    """``the rule's target``: how many candidates the matched rule kept for the filters (None: no rule matched)."""
    step = trace.policy
    if step is None or step.rule is None:
        return None
    total = len(trace.candidates)
    kept = first.entering if first is not None and first.entering is not None else total - len(aside)
    detail = f"rule {step.rule} kept {kept} of {total} for the filters: target {step.target or 'every model'}"
    if aside:
        detail += f"<br>its chain's {', '.join(aside)}: not filtered or scored (tried after, if attempts fail)"
    return _row("the rule's target", "absolute", kept, kept, ", ".join(aside), detail)


def _unique(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """A stage name seen before gets `` (2)``, `` (3)``: plotly draws one bar per distinct name."""
    seen: dict[str, int] = {}
    for row in rows:
        name = str(row["stage"])
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            row["stage"] = f"{name} ({seen[name]})"
    return rows


def waterfall_stages(trace: DecisionTrace) -> pd.DataFrame:
    """One row per stage: ``measure`` is plotly's (absolute/relative), ``change`` minus the removed count.

    ``detail`` is the hover text: per removed instance, its violation as text.
    """
    cands = {c.instance: c for c in trace.candidates}
    aside = unjudged(trace)
    count = len(trace.candidates)
    rows = [_row("all candidates", "absolute", count, count, "", ", ".join(cands) or "no candidates")]
    rounds = _rounds(trace)
    if (rule := _rule_stage(trace, rounds[0] if rounds else None, aside)) is not None:
        rows.append(rule)
        count = int(str(rule["count"]))
    for n, pass_ in enumerate(rounds):
        if n and pass_.entering is not None:  # a later level: the filters start again over its instances
            count = pass_.entering
            why = pass_.before.reason if pass_.before is not None and pass_.before.reason else "the next level"
            rows.append(_row("fallback", "absolute", count, count, "", why))
        for name, removed, constraint in pass_.stages:
            count -= len(removed)
            detail = "<br>".join(f"{i}: {_why(cands.get(i), constraint)}" for i in removed) or "removed none"
            rows.append(_row(name, "relative", count, -len(removed), ", ".join(removed), detail))
    rows += _tail(trace, aside)
    return pd.DataFrame(_unique(rows), columns=list(STAGE_COLUMNS))


def _tail(trace: DecisionTrace, aside: list[str]) -> list[dict[str, object]]:
    """``ranked`` (the candidates scored; by rank when none was) and ``selected`` (and whether it served)."""
    scored = any(c.total is not None for c in trace.candidates)
    ranked = sorted((c for c in trace.candidates if (c.total is not None if scored else c.rank is not None)
                     and c.instance not in aside), key=lambda c: (c.rank is None, c.rank or 0, c.instance))
    detail = "<br>".join(f"#{c.rank} {c.instance}" if c.rank is not None else c.instance for c in ranked)
    later = [cand for cand in trace.candidates if cand.instance in aside and cand.rank is not None]
    if later:
        detail += "<br>then, not scored: " + ", ".join(f"#{c.rank} {c.instance}" for c in later)
    sel = trace.selected_instance
    served = served_by(trace)
    if sel is None:
        picked = "nothing selected"
    elif served == sel:
        picked = sel
    elif served is None:
        picked = f"{sel}; no instance served: {unserved_text(trace)}"
    else:
        picked = f"{sel}; {served} served"
    chosen = 1 if sel else 0
    return [_row("ranked", "absolute", len(ranked), len(ranked), "", detail or "none ranked"),
            _row("selected", "absolute", chosen, chosen, "", picked)]
