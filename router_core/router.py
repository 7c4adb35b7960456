"""``Router.decide``: analyse -> policy -> filter -> score -> pick -> (fail open). Orchestration only.

``decide`` touches no I/O: given the request features and a state snapshot it always gives the
same ranking, which is what makes a stored decision replayable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import mmh3

from router_core.errors import UnknownModel
from router_core.framework import Candidate, Filter, Scorer
from router_core.recorder import TraceRecorder
from schemas.common import RoutingMode, StepKind
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import CandidateEval, RequestFeatures, ScoreTerm, Violation

__all__ = ["AUTO_MODEL", "Router"]

AUTO_MODEL = "auto"


@dataclass(frozen=True, slots=True)
class _Evaluated:
    candidate: Candidate
    violations: list[Violation]
    terms: list[ScoreTerm]

    @property
    def total(self) -> float:
        return sum(t.weighted for t in self.terms)


def _typed(plugin: Filter | Scorer) -> str:
    return f"{plugin.name}/{plugin.TYPE}"


class Router:
    """Ranks a fleet's instances for one request and records why.

    Args:
        fleet: Every instance the router may use.
        filters: Hard constraints, run in order.
        scorers: Weighted scorers; a candidate's total is the sum of all their terms.
        perf: Monotonic clock for step durations (injected).
    """

    def __init__(
        self,
        fleet: Sequence[InstanceSpec],
        filters: Sequence[Filter],
        scorers: Sequence[Scorer],
        *,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.fleet = list(fleet)
        self.filters = list(filters)
        self.scorers = list(scorers)
        self._perf = perf
        self._by_model: dict[str, list[InstanceSpec]] = {}
        for spec in self.fleet:
            self._by_model.setdefault(spec.model, []).append(spec)

    @property
    def models(self) -> list[str]:
        """Models served by the fleet, in configuration order."""
        return list(self._by_model)

    def candidates_for(self, model: str) -> list[InstanceSpec]:
        """Return the instances that may serve ``model`` (every instance for ``auto``)."""
        if model == AUTO_MODEL:
            return self.fleet
        if model not in self._by_model:
            raise UnknownModel(f"The model '{model}' does not exist", param="model", code="model_not_found")
        return self._by_model[model]

    def decide(
        self, features: RequestFeatures, state: Mapping[str, InstanceSnapshot], rec: TraceRecorder
    ) -> list[InstanceSpec]:
        """Rank the instances to try, best first, appending every step to ``rec``.

        Returns:
            The feasible instances by score; when none is feasible, every candidate by score
            (fail open, recorded as a fallback).

        Raises:
            UnknownModel: When no instance serves the requested model.
        """
        started = self._perf()
        lang = features.language.value
        rec.step(
            "analyse",
            StepKind.ANALYSE,
            value=float(features.est_input_tokens),
            reason=f"{features.n_messages} messages, ~{features.est_input_tokens} tokens, lang={lang}"
            + (", input cut for analysis" if features.truncated else ""),
        )
        specs = self.candidates_for(features.requested_model)
        rec.rule = "auto" if features.requested_model == AUTO_MODEL else f"model:{features.requested_model}"
        rec.step("policy", StepKind.POLICY, reason=f"rule {rec.rule}", instances=[s.id for s in specs])

        evaluated = [_Evaluated(Candidate(s, state[s.id]), [], []) for s in specs]
        for flt in self.filters:
            t0 = self._perf()
            kept, rejected = [], []
            for ev in evaluated:
                if ev.violations:
                    continue  # already out; later filters only see the survivors
                violation = flt.check(ev.candidate, features)
                if violation is None:
                    kept.append(ev.candidate.spec.id)
                else:
                    ev.violations.append(violation)
                    rejected.append(ev.candidate.spec.id)
            rec.step(
                f"filter/{flt.name}",
                StepKind.FILTER,
                value=float(len(kept)),
                reason=f"kept {len(kept)}, rejected {len(rejected)}",
                plugin=_typed(flt),
                instances=kept,
                rejected=rejected,
                duration_us=(self._perf() - t0) * 1e6,
            )

        feasible = [ev for ev in evaluated if not ev.violations]
        pool = feasible
        if not feasible:
            pool = evaluated
            reason = "no feasible instance; failing open over all candidates"
            rec.fallback(reason, RoutingMode.FAIL_OPEN)
            rec.step("fallback", StepKind.FALLBACK, reason=reason, instances=[e.candidate.spec.id for e in pool])

        for scorer in self.scorers:
            t0 = self._perf()
            for ev in pool:
                ev.terms.extend(scorer.terms(ev.candidate, features))
            rec.step(
                f"score/{scorer.name}",
                StepKind.SCORE,
                reason=f"scored {len(pool)} candidates",
                plugin=_typed(scorer),
                instances=[ev.candidate.spec.id for ev in pool],
                duration_us=(self._perf() - t0) * 1e6,
            )

        # Ties (idle instances all score 1.0) are broken by a hash of (request id, instance): the
        # same request always ranks the same way, yet different requests spread over the ties.
        def key(ev: _Evaluated) -> tuple[float, int]:
            return (-round(ev.total, 9), mmh3.hash(f"{rec.request_id}:{ev.candidate.spec.id}", signed=False))

        ranked = sorted(pool, key=key)
        rank_of = {id(ev): i + 1 for i, ev in enumerate(ranked)}
        rec.candidates = [
            CandidateEval(
                instance=ev.candidate.spec.id,
                model=ev.candidate.spec.model,
                zone=ev.candidate.spec.zone,
                feasible=not ev.violations,
                violations=ev.violations,
                state=ev.candidate.state,
                score_terms=ev.terms,
                total=ev.total if ev.terms else None,
                rank=rank_of.get(id(ev)),
            )
            for ev in evaluated
        ]
        if ranked:
            best = ranked[0]
            margin = best.total - ranked[1].total if len(ranked) > 1 else best.total
            rec.selected = (best.candidate.spec.model, best.candidate.spec.id)
            rec.step(
                "pick",
                StepKind.PICK,
                value=round(best.total, 6),
                reason=f"highest total {best.total:.3f}, margin {margin:.3f}; ties broken by mmh3(request_id:instance)",
                plugin="max-score/max-score-picker",
                instances=[best.candidate.spec.id],
            )
        rec.decision_ms = (self._perf() - started) * 1e3
        return [ev.candidate.spec for ev in ranked]
