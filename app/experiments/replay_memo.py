"""A decision memo for range replay: stored requests with the same decision inputs share one filter+score result.

Within a scrape round many stored requests saw the same snapshots, asked for the same model, met
the same context-window verdicts and fall in the same hour: their filter and score work is one and
the same. :class:`MemoReplayer` keys that work by exactly what it reads and re-runs per row only
what genuinely differs: the verdicts of the filters that read the request (computed to find the
entry) and the picker (its exact ties and samples are seeded by the request id). It gives
bit-identical decisions to :class:`app.experiments.replayer.Replayer` (``tests/app/experiments/
test_replay_memo.py`` replays varied traces both ways).

The key (:meth:`MemoReplayer.key`), level one, and why it is enough:

- the requested model: the rule and the candidate specs;
- the snapshot object of each candidate, compared by identity (:mod:`app.experiments.bulk` shares
  one object per distinct scrape; an entry keeps its snapshots alive, so no other object can take
  their ``id`` while it exists). An entry is used only while every snapshot is fresh at the row's
  time (age within ``scrape.suspect_after_s``): then a prepared candidate depends on its snapshot
  alone (:mod:`router_core.decide.prepared`). Rows with suspect or never-scraped state are not memoised;
- the local hour of the profiles (``scoring.timezone``) and whether it is a peak hour (``routing.peak_hours``
  in ``routing.timezone``): the weights in force (``Policy.weights_at`` reads that hour alone) and the
  instances' prices the cost scorer compares (``Policy.price``);
- when a weighted scorer reads the quality table: the table object (``Replayer.quality_for`` keeps
  one per distinct table) and the intent.

Level two, within an entry: the severity, score factor and constraint of every verdict of the
filters that read the request (the context window, attachments, breakers) on every candidate,
which is all the filter loop reads of a verdict. Beside state-only scorers only those whose inputs
are known are allowed (the cost scorer reads the pool's specs; the quality scorer the table and
the intent): a policy weighting any other scorer is replayed without the memo.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.experiments.replayer import Replayed, Replayer
from app.experiments.rows import ReplayRow
from router_core import (
    Candidate,
    CostScorer,
    DecisionContext,
    MaxScorePicker,
    Policy,
    QualityScorer,
    Scored,
    UnknownModel,
)
from schemas.fleet import InstanceSnapshot

__all__ = ["MAX_ENTRIES", "MemoReplayer", "Verdict", "memo_allowed"]

MAX_ENTRIES = 50_000  # level-one entries kept before the memo is cleared (rows come in time order)
_KNOWN_INPUTS = (CostScorer, QualityScorer)  # request-reading scorers whose inputs the key covers
Verdict = tuple[int, int, str, float | None, str]  # filter, candidate, severity, score factor, constraint


def memo_allowed(policy: Policy) -> bool:
    """True when every weighted scorer reads only state, the pool's specs, or the quality table and intent."""
    weighted = {n for n, w in policy.base_weights.items() if w > 0}
    weighted |= {n for p in policy.profiles for n, w in p.weights.items() if w > 0}
    return all(s.STATE_ONLY or type(s) in _KNOWN_INPUTS for n, s in policy.scorers.items() if n in weighted)


@dataclass(slots=True)
class _Entry:
    """One level-one key's candidates (spec order) and its results by request-verdict key."""

    snaps: tuple[InstanceSnapshot, ...]  # kept alive: their ids are in the key
    oldest: datetime  # the oldest scrape: every snapshot is fresh while this one is
    candidates: tuple[Candidate, ...]
    ranked: dict[tuple[Verdict, ...], tuple[Replayed, list[Scored], Replayed | None]] = field(default_factory=dict)


class MemoReplayer(Replayer):
    """A :class:`Replayer` sharing the filter and score work of rows with the same decision inputs.

    Args:
        policy: The policy to replay under.
        max_entries: Level-one entries kept before the memo is cleared.
    """

    def __init__(self, policy: Policy, *, max_entries: int = MAX_ENTRIES) -> None:
        super().__init__(policy)
        self.enabled = memo_allowed(policy)
        self.max_entries = max_entries
        self._memo: dict[tuple[Hashable, ...], _Entry] = {}
        self._checks = [f.check for f in policy.filters if not f.STATE_ONLY]  # the filters that read the request
        self._by_quality = self._reads_quality and any(isinstance(s, QualityScorer) for s in policy.scorers.values())
        self._suspect = policy.scrape.suspect_after_s
        self._max_picker = type(policy.picker) is MaxScorePicker
        self.hits = self.misses = 0

    def key(self, ctx: DecisionContext, snaps: Sequence[InstanceSnapshot]) -> tuple[Hashable, ...]:
        """Level one of the memo key: requested model, hour, quality table and intent (when read), snapshots."""
        quality: tuple[Hashable, ...] = (id(ctx.quality), ctx.intent) if self._by_quality else ()
        policy = self.policy
        hours = policy.scoring_hour(ctx.now), policy.peak_hours.at(ctx.now)
        return (ctx.features.requested_model, *hours, *quality, *map(id, snaps))

    def verdicts(self, ctx: DecisionContext, candidates: Sequence[Candidate]) -> tuple[Verdict, ...]:
        """Level two: what the filter loop reads of each verdict of the filters that read the request."""
        out: list[Verdict] | None = None
        for i, check in enumerate(self._checks):
            for j, cand in enumerate(candidates):
                v = check(cand, ctx)
                if v is not None:
                    out = out or []
                    out.append((i, j, v.severity, v.score_factor, v.constraint))
        return () if out is None else tuple(out)

    def decide(self, row: ReplayRow) -> Replayed:
        """Return the new decision on ``row``, from the memo when its inputs were met before."""
        ctx = self.context(row)
        state = self.state_for(row)
        if not self.enabled or ctx.mode is not None or ctx.affinity is not None or ctx.budget is not None or (
                ctx.route is not None and ctx.route.rule is not None):  # what the key does not cover: Router.decide
            return self._decided(row, ctx, state)
        try:
            specs = self.router.candidates_for(ctx.features.requested_model)
        except UnknownModel:
            return self._decided(row, ctx, state)
        snaps = [state[s.id] for s in specs]
        key = self.key(ctx, snaps)
        entry = self._memo.get(key)
        if entry is None or (ctx.now - entry.oldest).total_seconds() > self._suspect:
            return self._first(row, ctx, state, key, snaps)
        vkey = self.verdicts(ctx, entry.candidates)
        hit = entry.ranked.get(vkey)
        if hit is None:
            got, scored = self.rank(ctx, state)
            if scored is None:
                return got
            hit = entry.ranked[vkey] = (got, scored, self._request_free(row.request_id, got, scored))
        self.hits += 1
        ranked, scored, final = hit
        return final if final is not None else self.pick(row.request_id, ranked, scored)

    def _decided(self, row: ReplayRow, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot]) -> Replayed:
        """The unmemoised path (the plain :class:`Replayer`'s)."""
        self.misses += 1
        got, scored = self.rank(ctx, state)
        return got if scored is None else self.pick(row.request_id, got, scored)

    def _first(self, row: ReplayRow, ctx: DecisionContext, state: Mapping[str, InstanceSnapshot],
               key: tuple[Hashable, ...], snaps: list[InstanceSnapshot]) -> Replayed:
        """A level-one miss: decide unmemoised, and keep the work when every snapshot is fresh."""
        self.misses += 1
        got, scored = self.rank(ctx, state)
        if scored is None:
            return got
        final = self._request_free(row.request_id, got, scored)
        scraped = [s.scraped_at for s in snaps]
        if any(at is None for at in scraped):
            return final if final is not None else self.pick(row.request_id, got, scored)
        oldest = min(at for at in scraped if at is not None)
        if (ctx.now - oldest).total_seconds() <= self._suspect:
            if len(self._memo) >= self.max_entries:
                self._memo.clear()
            entry = self._memo[key] = _Entry(tuple(snaps), oldest, tuple(p.candidate for p in got.prepared.values()))
            entry.ranked[self.verdicts(ctx, entry.candidates)] = (got, scored, final)
        return final if final is not None else self.pick(row.request_id, got, scored)

    def _request_free(self, request_id: str, ranked: Replayed, scored: list[Scored]) -> Replayed | None:
        """The picked decision when no request can pick otherwise (max score, a unique best), else None."""
        if not self._max_picker or not scored:
            return None
        best = max(t for _, t in scored)
        if sum(1 for _, t in scored if t == best) > 1:
            return None  # an exact tie: the request id breaks it
        return self.pick(request_id, ranked, scored)
