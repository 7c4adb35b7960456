"""The margin between the top two ranked candidates and the smallest one-term change that flips them.

Pure functions over a :class:`schemas.trace.DecisionTrace`. A candidate's total is
``weight_factor * sum(weight_i * raw_i)``; changing one raw value by ``d`` moves the total by
``weight_factor * weight_i * d``, so the change that equalises the totals is
``margin / (weight_factor * weight_i)``, on the winner (down) or on the runner-up (up).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["Flip", "Margin", "flip_changes", "margin", "smallest_flip", "total_of"]

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class Margin:
    """The top-ranked candidate, the runner-up, and by how much and on which term the first won."""

    winner: CandidateEval
    runner_up: CandidateEval
    margin: float
    deciding_term: str | None
    """The term that contributed most to the margin (None when no term favoured the winner)."""


@dataclass(frozen=True, slots=True)
class Flip:
    """One raw-value change that equalises the two totals."""

    side: str
    """``winner`` (lowered) or ``runner-up`` (raised)."""
    instance: str
    term: str
    raw: float
    new_raw: float
    weight: float

    @property
    def delta(self) -> float:
        """Size of the change (always positive)."""
        return abs(self.new_raw - self.raw)


def total_of(trace: DecisionTrace, cand: CandidateEval) -> float:
    """The candidate's recorded total, or ``weight_factor * sum(weighted terms)`` when none was recorded."""
    if cand.total is not None:
        return cand.total
    return cand.weight_factor * sum(w for _, _, _, w in trace.terms_of(cand))


def _ranked(trace: DecisionTrace) -> list[CandidateEval]:
    return sorted((c for c in trace.candidates if c.rank is not None), key=lambda c: (c.rank or 0, c.instance))


def margin(trace: DecisionTrace) -> Margin | None:
    """The margin of rank 1 over rank 2; None with fewer than two ranked candidates."""
    ranked = _ranked(trace)
    if len(ranked) < 2:
        return None
    win, run = ranked[0], ranked[1]
    by_term: dict[str, float] = {}
    raw_run = {name: raw for name, raw, _, _ in trace.terms_of(run)}
    for name, _, weight, weighted in trace.terms_of(win):
        if name in raw_run:
            by_term[name] = win.weight_factor * weighted - run.weight_factor * weight * raw_run[name]
    best = max(by_term.items(), key=lambda kv: kv[1], default=None)
    deciding = best[0] if best is not None and best[1] > _EPS else None
    return Margin(win, run, total_of(trace, win) - total_of(trace, run), deciding)


def flip_changes(trace: DecisionTrace) -> list[Flip]:
    """Every feasible one-term change (new raw value within [0, 1]) that equalises the top two, smallest first."""
    m = margin(trace)
    if m is None:
        return []
    out: list[Flip] = []
    for side, cand, sign in (("winner", m.winner, -1.0), ("runner-up", m.runner_up, 1.0)):
        for name, raw, weight, _ in trace.terms_of(cand):
            slope = cand.weight_factor * weight
            if slope <= _EPS:
                continue
            new = raw + sign * max(m.margin, 0.0) / slope
            if -_EPS <= new <= 1 + _EPS:
                out.append(Flip(side, cand.instance, name, raw, min(max(new, 0.0), 1.0), weight))
    return sorted(out, key=lambda f: (f.delta, f.side != "winner", f.term))


def smallest_flip(trace: DecisionTrace) -> Flip | None:
    """The smallest feasible one-term change that flips the winner, or None when no single term can."""
    changes = flip_changes(trace)
    return changes[0] if changes else None
