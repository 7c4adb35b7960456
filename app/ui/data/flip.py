"""The smallest single change that would have changed the winner, over everything a trace records.

Pure functions over a :class:`schemas.trace.DecisionTrace`. The *leader* is the scored candidate
with the highest total (:mod:`app.ui.data.scores`): the max-score winner, or with a sampling picker
(softmax, p2c) the most likely draw, so that there a flip makes another instance the most likely
(``Flip.likeliest``). Each change is sized on one scale, 0 (none needed) to 1, and the smallest wins:

- ``term``: one raw score term. A total is ``weight_factor * sum(weight_i * raw_i)`` with raw terms
  clamped to [0, 1], so raising a challenger's term by ``d`` moves its total by ``weight_factor *
  weight_i * d``: any ranked candidate may tie the leader (raised), or the leader the runner-up
  (lowered). A change needing a raw value outside [0, 1] is not possible. Size: the raw change.
  At the tie the picker's tie-break (``mmh3(request_id:instance)``) decides (``Flip.at_tie``): when
  it keeps the leader, the winner changes only past the tie (not possible when the tie is at 0 or
  1); sampling, a tie is equal chances, so likewise.
- ``feasibility``: a constraint metric crossing its threshold. A removed candidate with a single
  hard violation, whose recorded would-be terms would then put it ahead of the leader; or the
  leader breaking a threshold another candidate's violation shows (the runner-up then leads). Size:
  the change relative to the larger of value and threshold. (A latched constraint also wants its
  re-entry bound held for a while; the threshold is where the verdict turns.)
- ``rule``: a rule tried before the one that matched, failed by exactly one atom (its trace line
  stands alone), had that atom turned: "had request_time.hour been 16, rule urgent would have
  matched". The trace does not record that rule's target, so this counts as changing the rule.
  Size: :class:`app.ui.data.atom_change.AtomChange`.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Literal

from app.explain import breach_op
from app.ui.data.atom_change import atom_change
from app.ui.data.scores import EPS, gap_terms, is_sampled, scored, tie_break, total_of
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["Flip", "FlipKind", "Margin", "flip_changes", "margin", "smallest_flip", "total_of"]

FlipKind = Literal["term", "feasibility", "rule"]
_BREAKS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


@dataclass(frozen=True, slots=True)
class Margin:
    """The leader, the runner-up (by total), and by how much and on which term the first led."""

    winner: CandidateEval
    runner_up: CandidateEval
    margin: float
    deciding_term: str | None
    """The term that contributed most to the margin (None when no term favoured the winner)."""


@dataclass(frozen=True, slots=True)
class Flip:
    """One single change that would have changed the winner (or, sampling, the most likely draw).

    Attributes:
        kind: ``term``, ``feasibility`` or ``rule``.
        side: ``winner`` (the leader's value changes), ``challenger`` (another candidate's) or ``request``.
        instance: Whose value changes (empty for a request feature).
        term: The score term, the constraint, or the rule.
        raw: The value now: the raw term, the metric, the feature as the trace shows it.
        new_raw: The value that flips it (for a request feature, in words: ``16``, ``above 8000``).
        weight: The term's weight (0 for the other kinds).
        new_winner: Who would lead then: an instance, or ``rule <name>``.
        size: The change on the common 0-1 scale.
        likeliest: The picker samples: the change makes ``new_winner`` the most likely draw.
        metric: ``feasibility``: the metric; ``rule``: the feature.
        at_tie: ``term``: whom the picker's tie-break puts first when the change just ties the totals
            (``new_winner``: the tie itself changes the winner; the leader: only a change past it
            does); None when a sampling picker draws (a tie is equal chances) and for other kinds.
    """

    kind: FlipKind
    side: str
    instance: str
    term: str
    raw: float | str | None
    new_raw: float | str | None
    weight: float = 0.0
    new_winner: str = ""
    size: float = 0.0
    likeliest: bool = False
    metric: str | None = None
    at_tie: str | None = None

    @property
    def delta(self) -> float:
        """Size of the change (for a term, the raw change)."""
        return self.size


def margin(trace: DecisionTrace) -> Margin | None:
    """The leader's margin over the runner-up (by total); None with fewer than two scored candidates."""
    pool = scored(trace)
    if len(pool) < 2:
        return None
    win, run = pool[0], pool[1]
    best = max(gap_terms(trace, win, run).items(), key=lambda kv: kv[1], default=None)
    deciding = best[0] if best is not None and best[1] > EPS else None
    return Margin(win, run, total_of(trace, win) - total_of(trace, run), deciding)


def flip_changes(trace: DecisionTrace) -> list[Flip]:
    """Every possible single change that changes the winner, smallest first."""
    pool = scored(trace)
    likeliest = is_sampled(trace)
    out = _term_flips(trace, pool, likeliest) + _feasibility_flips(trace, pool, likeliest) + _rule_flips(trace)
    order = {"term": 0, "feasibility": 1, "rule": 2}
    return sorted(out, key=lambda f: (round(f.size, 12), order[f.kind], f.side != "winner", f.instance, f.term))


def smallest_flip(trace: DecisionTrace) -> Flip | None:
    """The smallest single change that changes the winner, or None when no single change can."""
    changes = flip_changes(trace)
    return changes[0] if changes else None


def _term_flips(trace: DecisionTrace, pool: list[CandidateEval], likeliest: bool) -> list[Flip]:
    if len(pool) < 2:
        return []
    lead, run = pool[0], pool[1]
    top = total_of(trace, lead)

    def at_tie(level: float, moved: CandidateEval) -> str | None:
        """Who the tie-break puts first once ``moved`` is at ``level`` with every candidate already there."""
        tied = [moved.instance, *(c.instance for c in pool if c is not moved and abs(total_of(trace, c) - level) < EPS)]
        return None if likeliest else tie_break(trace.request_id, tied)

    out = []
    lowered = at_tie(total_of(trace, run), lead)
    for name, raw, weight, _ in trace.terms_of(lead):  # the leader down to the runner-up
        slope = lead.weight_factor * weight
        new = raw - (top - total_of(trace, run)) / slope if slope > EPS else -1.0
        if new >= -EPS and (new > EPS or lowered not in (None, lead.instance)):  # no room past a tie it loses
            new = max(new, 0.0)
            out.append(Flip("term", "winner", lead.instance, name, raw, new, weight, run.instance, raw - new,
                            likeliest, at_tie=lowered))
    for cand in pool[1:]:  # any other up to the leader
        gap, raised = top - total_of(trace, cand), at_tie(top, cand)
        for name, raw, weight, _ in trace.terms_of(cand):
            slope = cand.weight_factor * weight
            new = raw + gap / slope if slope > EPS else 2.0
            if new <= 1 + EPS and (new < 1 - EPS or raised not in (None, lead.instance)):
                new = min(new, 1.0)
                out.append(Flip("term", "challenger", cand.instance, name, raw, new, weight, cand.instance, new - raw,
                                likeliest, at_tie=raised))
    return out


def _relative(value: float, threshold: float) -> float:
    return min(abs(value - threshold) / max(abs(value), abs(threshold), EPS), 1.0)


def _feasibility_flips(trace: DecisionTrace, pool: list[CandidateEval], likeliest: bool) -> list[Flip]:
    top = total_of(trace, pool[0]) if pool else float("-inf")
    out = []
    for cand in trace.candidates:  # a removed candidate made feasible, that would then lead
        hard = [v for v in cand.violations if v.severity == "hard"]
        if cand.feasible or len(hard) != 1 or not cand.score_terms:
            continue
        v, value = hard[0], hard[0].value
        if value is not None and breach_op(v) is not None and total_of(trace, cand) > top + EPS:
            out.append(Flip("feasibility", "challenger", cand.instance, v.constraint, value, v.threshold,
                            new_winner=cand.instance, size=_relative(value, v.threshold), likeliest=likeliest,
                            metric=v.metric))
    if len(pool) < 2 or pool[0].state is None:
        return out
    lead, seen = pool[0], set()
    for cand in trace.candidates:  # the leader breaking a threshold a violation shows
        for v in cand.violations:
            breach = breach_op(v)
            key = (v.constraint, v.metric, v.threshold)
            value = getattr(lead.state, v.metric, None)
            if v.severity != "hard" or breach not in _BREAKS or key in seen or isinstance(value, bool) \
                    or not isinstance(value, int | float) or _BREAKS[breach](value, v.threshold):
                continue  # not a number, or already past it (held in by a latch): no crossing to make
            seen.add(key)
            out.append(Flip("feasibility", "winner", lead.instance, v.constraint, float(value), v.threshold,
                            new_winner=pool[1].instance, size=_relative(value, v.threshold), likeliest=likeliest,
                            metric=v.metric))
    return out


def _rule_flips(trace: DecisionTrace) -> list[Flip]:
    step = trace.policy
    if step is None:
        return []
    out = []
    for verdict in step.tried:
        if verdict.matched or len(verdict.detail) != 1 or (change := atom_change(verdict.detail[0])) is None:
            continue
        out.append(Flip("rule", "request", "", verdict.rule, change.old, change.new, new_winner=f"rule {verdict.rule}",
                        size=change.size, metric=change.feature))
    return out
