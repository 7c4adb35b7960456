"""Counting a replay as it runs: flips, matrices, causes and predicted deltas, mergeable across processes.

Attribution of one flip, first match wins: the new policy serves the request nowhere
(``no_target``); another rule applies (``rule``); the stored winner's instance is not in the new
fleet (``fleet``); the stored rule still applies but now targets another model, or no longer
takes the stored winner's instance among its candidates (``rule``, named by the rule and the
change); a filter removed the stored winner (``filter``, named by the constraint); the new
winner was not scored in the stored decision, so a filter held it out then (``filter``,
``released``); otherwise the score term whose weighted difference between the new and the stored
winner grew most from the stored decision to the replayed one (``term``).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from app.experiments.replayer import Replayed, Replayer
from app.experiments.rows import ReplayRow
from schemas.replay_report import NONE_TARGET

__all__ = ["Tally", "cause_of"]


def _margins(weights: Iterable[tuple[str, float]], new: Sequence[float] | None,
             old: Sequence[float] | None) -> dict[str, float]:
    """Per term, ``weight * (term of the new winner - term of the old winner)`` (0 where one is missing)."""
    if new is None or old is None:
        return {name: 0.0 for name, _ in weights}
    both = min(len(new), len(old))
    return {name: w * (new[k] - old[k]) if k < both else 0.0 for k, (name, w) in enumerate(weights)}


def _by_rule(row: ReplayRow, got: Replayed) -> str | None:
    """How the stored rule, applying again, changed its candidates (None: it did not, or no rule routed ``row``)."""
    st = row.settled
    if st is None or st.rule is None or got.rule != st.rule:
        return None
    if got.target != st.target:
        return f"{st.rule}: target {st.target or 'every model'} -> {got.target or 'every model'}"
    if row.instance not in got.known:
        return f"{st.rule}: {row.instance} no longer among its candidates"
    return None


def cause_of(row: ReplayRow, got: Replayed, fleet: Collection[str]) -> tuple[str, str]:
    """Return ``(kind, name)``: why ``row``'s decision flipped to ``got`` (see the module docstring).

    ``fleet``: the new policy's instances.
    """
    new, old = got.instance, row.instance
    if new is None:
        return "no_target", got.note or "nothing feasible"
    if row.rule is not None and got.rule is not None and row.rule != got.rule:
        return "rule", f"{row.rule} -> {got.rule}"
    if old is None:
        return "no_target", "the stored decision served nowhere"
    if old not in fleet:
        return "fleet", f"{old} not in the new fleet"
    if (changed := _by_rule(row, got)) is not None:
        return "rule", changed
    if old in got.removed:
        return "filter", got.removed[old]
    terms = row.terms
    if len(terms) != len(row.candidates):
        raise ValueError(f"{row.request_id}: {len(row.candidates)} candidates but {len(terms)} term lists")
    at_new = at_old = None  # the last candidate of each instance, as a dict of them would hold
    for k, (inst, _) in enumerate(row.candidates):
        if inst == new:
            at_new = k
        if inst == old:
            at_old = k
    stored_new = terms[at_new] if at_new is not None else None
    if not stored_new:
        return "filter", f"released: {new} was not scored in the stored decision"
    stored_old = terms[at_old] if at_old is not None else None
    scored = got.terms
    after = _margins(got.weights.items(), scored.get(new), scored.get(old))
    stored_w = dict(row.weights)
    before = _margins([(n, stored_w[n]) for n, _ in row.weights], stored_new, stored_old)
    moved = {n: after.get(n, 0.0) - before.get(n, 0.0) for n in {*after, *before}}
    if not moved:
        return "term", "unknown"
    return "term", max(sorted(moved), key=moved.__getitem__)


@dataclass
class _Delta:
    """A predicted difference over the flips of a replay.

    ``requests`` counts the unflipped (0) and the flips both values are known for; ``left_out`` counts
    the other flips by why a value is unknown (the report says so: no flip is left out silently).
    """

    requests: int = 0
    flipped: int = 0
    old_sum: float = 0.0
    new_sum: float = 0.0
    left_out: Counter[str] = field(default_factory=Counter)

    def add(self, old: float | None, new: float | None, flipped: bool, why: str = "no prediction") -> None:
        if not flipped:
            self.requests += 1
            return
        if old is None or new is None:
            self.left_out[why] += 1
            return
        self.requests += 1
        self.flipped += 1
        self.old_sum += old
        self.new_sum += new

    def merge(self, other: _Delta) -> None:
        self.requests += other.requests
        self.flipped += other.flipped
        self.old_sum += other.old_sum
        self.new_sum += other.new_sum
        self.left_out.update(other.left_out)


def _unknown(row: ReplayRow, got: Replayed, fleet: Collection[str], old: float | None, what: str) -> str:
    """Why a flip's predicted ``what`` (cost, latency) is unknown for the stored (``old`` None) or the new choice."""
    if got.instance is None:
        return "served nowhere by the new policy"
    if row.instance is None:
        return "the stored decision served nowhere"
    if old is None:
        return f"stored instance not in the new fleet and no {what} stored" if row.instance not in fleet \
            else f"no {what} for the stored instance"
    if got.instance not in row.states:
        return "newly chosen instance not among the stored candidates, so no state of it in the trace"
    return f"no {what} for the newly chosen instance"


@dataclass
class Tally:
    """Running counts of one replay (plain data: it crosses process boundaries)."""

    n: int = 0
    replayed: int = 0
    flips: int = 0
    model_flips: int = 0
    missing: Counter[str] = field(default_factory=Counter)
    matrix: dict[str, Counter[str]] = field(default_factory=dict)
    instances: dict[str, Counter[str]] = field(default_factory=dict)
    causes: Counter[tuple[str, str]] = field(default_factory=Counter)
    cost: _Delta = field(default_factory=_Delta)
    latency: _Delta = field(default_factory=_Delta)
    cpu_s: float = 0.0  # CPU time of the processes that replayed (reading included)
    # Per replayed request with a logged selection probability, for the inverse-propensity estimate
    # (ingest.experiments.ips): that probability, whether the new policy picks the same instance
    # (its pickers are seeded by the request id, so its choice is a function of the request), the
    # logged cost and misroute (NaN when none was recorded).
    ips_logged: array[float] = field(default_factory=lambda: array("d"))
    ips_match: array[float] = field(default_factory=lambda: array("d"))
    ips_cost: array[float] = field(default_factory=lambda: array("d"))
    ips_misroute: array[float] = field(default_factory=lambda: array("d"))
    ips_unlogged: int = 0  # replayed requests without a logged selection probability (older traces, retries)

    def skip(self, reason: str) -> None:
        """Count a trace that cannot be replayed."""
        self.n += 1
        self.missing[reason] += 1

    def add(self, row: ReplayRow, got: Replayed, replayer: Replayer) -> None:
        """Count one replayed row and its new decision."""
        self.n += 1
        self.replayed += 1
        old_m, new_m = row.model or NONE_TARGET, got.model or NONE_TARGET
        old_i, new_i = row.instance or NONE_TARGET, got.instance or NONE_TARGET
        cell = self.matrix.get(old_m)
        if cell is None:
            cell = self.matrix[old_m] = Counter()
        cell[new_m] += 1
        cell = self.instances.get(old_i)
        if cell is None:
            cell = self.instances[old_i] = Counter()
        cell[new_i] += 1
        flipped = old_i != new_i
        if row.selection_probability is not None:
            nan = float("nan")
            self.ips_logged.append(row.selection_probability)
            self.ips_match.append(0.0 if flipped else 1.0)
            self.ips_cost.append(nan if row.cost is None else row.cost)
            self.ips_misroute.append(nan if row.misroute is None else float(row.misroute))
        else:
            self.ips_unlogged += 1
        if flipped:
            self.flips += 1
            self.model_flips += old_m != new_m
            self.causes[cause_of(row, got, replayer.specs)] += 1
            old_cost = replayer.cost_of(row.instance, row.ts, row.features)
            old_cost = old_cost if old_cost is not None else row.cost
            new_cost = replayer.cost_of(got.instance, row.ts, row.features)
            if old_cost is None or new_cost is None:
                self.cost.add(None, None, True, _unknown(row, got, replayer.specs, old_cost, "cost"))
            else:
                self.cost.add(old_cost, new_cost, True)
            old_ms, new_ms = replayer.latency_of(row.instance, got, row), replayer.latency_of(got.instance, got, row)
            if old_ms is None or new_ms is None:
                self.latency.add(None, None, True, _unknown(row, got, replayer.specs, old_ms, "latency"))
            else:
                self.latency.add(old_ms, new_ms, True)
        else:
            self.cost.add(None, None, False)
            self.latency.add(None, None, False)

    def merge(self, other: Tally) -> None:
        """Add ``other``'s counts to these."""
        self.n += other.n
        self.replayed += other.replayed
        self.flips += other.flips
        self.model_flips += other.model_flips
        self.missing.update(other.missing)
        for mine, theirs in ((self.matrix, other.matrix), (self.instances, other.instances)):
            for k, row in theirs.items():
                mine.setdefault(k, Counter()).update(row)
        self.causes.update(other.causes)
        self.cost.merge(other.cost)
        self.latency.merge(other.latency)
        self.cpu_s += other.cpu_s
        self.ips_unlogged += other.ips_unlogged
        for name in ("ips_logged", "ips_match", "ips_cost", "ips_misroute"):
            getattr(self, name).extend(getattr(other, name))
