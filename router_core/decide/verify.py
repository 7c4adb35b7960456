"""Is a re-decided trace the same decision? The first thing that differs, or None.

Compared, in this order: the rule, the score weights, the router's steps (name, kind, value,
reason, plugin, instances, rejected; not their durations), then every candidate (feasible, rank,
verdicts, score terms, soft factor, total, the picker's chance of drawing it) and the picker's
probability for the first choice. What the gateway added after the decision (attempts, retries,
degraded steps) is not the router's and is not compared; a decision taken again after a degraded
step is compared with that decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from router_core.decide.decision import Decision
from schemas.trace import DecisionStep, DecisionTrace, Violation

__all__ = ["Difference", "first_difference"]

_CAP = "degrade/cap_max_tokens"


@dataclass(frozen=True, slots=True)
class Difference:
    """Where a replayed decision first differs from the live one, and both values there."""

    step: str
    live: Any
    replayed: Any


def _step(s: DecisionStep | dict[str, Any]) -> tuple[Any, ...]:
    d = s.model_dump() if isinstance(s, DecisionStep) else s
    return (d["step"], str(d["kind"]), d["value"], d["reason"], d["plugin"], list(d["instances"]),
            list(d["rejected"]))


def _verdict(v: Violation) -> tuple[Any, ...]:
    return (v.constraint, v.metric, v.op, v.value, v.threshold, v.severity, v.score_factor, v.reason)


def _live_steps(trace: DecisionTrace, n: int) -> Sequence[DecisionStep]:
    """The router's steps of the decision the live trace ended with (after a capping step, that decision's)."""
    steps = trace.decision_trace
    caps = [i for i, s in enumerate(steps) if s.step == _CAP and s.value is not None
            and "still no feasible" not in s.reason]
    start = caps[-1] + 1 if caps else 0
    return steps[start:start + n]


def first_difference(trace: DecisionTrace, decision: Decision) -> Difference | None:
    """The first difference between the live ``trace`` and ``decision`` (its replay), None when they agree."""
    if trace.rule != decision.rule:
        return Difference("rule", trace.rule, decision.rule)
    live_w = [(w.name, w.weight, w.scorer) for w in trace.score_weights]
    new_w = [(w["name"], w["weight"], w["scorer"]) for w in decision.weights]
    if live_w != new_w:
        return Difference("score_weights", live_w, new_w)
    live_steps = _live_steps(trace, len(decision.steps))
    for i, new in enumerate(decision.steps):
        b = _step(new)
        a = _step(live_steps[i]) if i < len(live_steps) else None
        if a != b:
            return Difference(f"step {i} {new['step']}", a, b)
    if len(trace.candidates) != len(decision.candidates):
        return Difference("candidates", [c.instance for c in trace.candidates],
                          [c["instance"] for c in decision.candidates])
    for live, new in zip(trace.candidates, decision.candidates, strict=True):
        where = f"candidate {live.instance}"
        pairs: tuple[tuple[str, Any, Any], ...] = (
            ("instance", live.instance, new["instance"]),
            ("feasible", live.feasible, new["feasible"]),
            ("rank", live.rank, new["rank"]),
            ("violations", [_verdict(v) for v in live.violations], [_verdict(v) for v in new["violations"]]),
            ("score_terms", list(live.score_terms), list(new["score_terms"])),
            ("weight_factor", live.weight_factor, new["weight_factor"]),
            ("total", live.total, new["total"]),
            ("probability", live.probability, new.get("probability")),
        )
        for name, a, b in pairs:
            if a != b:
                return Difference(f"{where}: {name}", a, b)
    first = decision.selected
    if first is not None and trace.selected_instance == first.id and trace.selection_probability is not None \
            and trace.selection_probability != decision.selection_probability:
        return Difference("selection_probability", trace.selection_probability, decision.selection_probability)
    return None
