"""A rule's levels, and the fallbacks when nothing is feasible: where a decision looks past its first pool.

:class:`Fallbacks` walks a matched rule's levels in order (its primary target, then its chain's
models) until one has a feasible pool, dropping the candidates that break the rule's resource
guarantee; when nothing is feasible it tries the fallback model, then fails open over the
candidates whose context window holds the request, or rejects (``on_empty``). :class:`FallbackNote`
holds the first fallback reason and the mode as the decision runs. Each step is recorded. Used by
:meth:`~router_core.decide.router.Router.decide`.
"""

from __future__ import annotations

from collections.abc import Mapping

from router_core.decide.decision import DecisionContext, Steps
from router_core.decide.filtering import Filters
from router_core.decide.policy import Policy
from router_core.decide.prepared import Prepared
from router_core.rules.ir import Rule
from router_core.rules.route import RouteChoice, guarantee_violation
from schemas.common import RoutingMode, StepKind
from schemas.config import ModelProfile
from schemas.fleet import InstanceSnapshot, InstanceSpec
from schemas.trace import Violation

__all__ = ["CONTEXT_LENGTH_EXCEEDED", "FallbackNote", "Fallbacks"]

# Decision.no_feasible when nothing was feasible and no candidate's context window holds the request: failing
# open would send it where it cannot fit, so the gateway answers it as it answers a pinned model too large (400).
CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"
_DEFAULT_PROFILE = ModelProfile()
Verdicts = dict[str, list[Violation]]


class FallbackNote:
    """The first fallback reason and the mode, as the decision runs."""

    __slots__ = ("empty", "levels", "mode", "reason")

    def __init__(self) -> None:
        self.reason: str | None = None
        self.mode = RoutingMode.NORMAL
        self.levels: tuple[str, ...] = ()
        self.empty: str | None = None  # Decision.no_feasible

    def note(self, reason: str, mode: RoutingMode | None = None) -> None:
        """Keep ``reason`` if it is the first; a ``mode`` given replaces the mode."""
        if self.reason is None:
            self.reason = reason
        if mode is not None:
            self.mode = mode


class Fallbacks:
    """A rule's levels and the empty pool's fallbacks, over the policy's fleet through its filters.

    Args:
        policy: The fleet, the models' profiles, the fallback model and ``on_empty``.
        filters: The filter step that each level's candidates go through.
    """

    def __init__(self, policy: Policy, filters: Filters) -> None:
        self.policy = policy
        self._filters = filters

    def by_rule(self, route: RouteChoice, state: Mapping[str, InstanceSnapshot], ctx: DecisionContext, steps: Steps,
                fb: FallbackNote, ages: dict[str, float | None],
                ) -> tuple[list[InstanceSpec], list[Prepared], Verdicts, dict[str, float], list[str]]:
        """The matched rule's levels in order (primary, then the chain's models) until one has a feasible pool.

        Returns every candidate looked at, the first feasible pool, verdicts, soft factors, and the
        feasible instances of the levels after it (tried after the pool when attempts fail).
        """
        rule = route.rule
        assert rule is not None
        levels = route.levels()
        chain = route.rules.chain_of(rule)
        steps.add("policy", StepKind.POLICY, reason=f"rule {rule.name} matched after {len(route.match.tried)} tried; "
                  f"target {rule.primary or 'every model'}" + (f"; chain {' -> '.join(chain)}" if chain else "")
                  + (f"; throttled ({route.throttled})" if route.throttled else ""))
        specs: list[InstanceSpec] = []
        violations: dict[str, list[Violation]] = {}
        factors: dict[str, float] = {}
        pool: list[Prepared] = []
        spill: list[str] = []
        seen: set[str] = set()
        for n, model in enumerate(levels):
            level = self._level(model, rule.requires)
            specs += [s for s in level if s.id not in seen]
            seen.update(s.id for s in level)
            if pool:  # a later level: its feasible instances follow the pool when attempts fail, best state first
                more, _, _ = self._filters.run(level, state, ctx, None, ages)
                weights = self.policy.base_weights
                more.sort(key=lambda p: -sum(w * p.terms.get(name, 0.0) for name, w in weights.items()))
                spill += [p.candidate.spec.id for p in self._guarantee(more, rule, {})]
                continue
            fb.levels += (model or "*",)
            found, v, f = self._filters.run(level, state, ctx, steps, ages)
            violations.update(v)
            factors.update(f)
            pool = self._guarantee(found, rule, violations)
            if not pool and n + 1 < len(levels):
                why = (f"no feasible instance of {model or 'any model'} on rule {rule.name}; "
                       f"trying {levels[n + 1] or 'every model'}")
                fb.note(why)
                steps.add("fallback", StepKind.FALLBACK, reason=why)
        return specs, pool, violations, factors, spill

    def _level(self, model: str | None, requires: tuple[str, ...]) -> list[InstanceSpec]:
        """The instances of ``model`` (None: every instance) declaring every required feature."""
        specs = self.policy.fleet if model is None else (self.policy.instances_of(model) or ())
        return [s for s in specs if all(f in s.features for f in requires)] if requires else list(specs)

    def _guarantee(self, pool: list[Prepared], rule: Rule, violations: dict[str, list[Violation]]) -> list[Prepared]:
        """Drop the candidates that break the rule's resource guarantee, recording why."""
        if rule.guarantee is None:
            return pool
        kept = []
        for p in pool:
            cand = p.candidate
            slots = self.policy.models.get(cand.spec.model, _DEFAULT_PROFILE).max_concurrency
            v = guarantee_violation(rule, cand, slots)
            if v is None:
                kept.append(p)
            else:
                violations.setdefault(cand.spec.id, []).append(v)
        return kept

    def when_empty(self, specs: list[InstanceSpec], state: Mapping[str, InstanceSnapshot], ctx: DecisionContext,
                   steps: Steps, fb: FallbackNote, rule: str, violations: dict[str, list[Violation]],
                   factors: dict[str, float], ages: dict[str, float | None],
                   ) -> tuple[list[Prepared], list[InstanceSpec]]:
        """Nothing feasible: the fallback model's instances, then fail open or reject, as configured."""
        pol, requested = self.policy, ctx.features.requested_model
        name = pol.fallback_model
        if name and name != requested and (extra := pol.instances_of(name)):
            fb.note(f"no feasible instance of {rule}; trying fallback model {name}")
            steps.add("fallback", StepKind.FALLBACK, reason=fb.reason or "", instances=[s.id for s in extra])
            specs = specs + [s for s in extra if s not in specs]
            pool, more, more_factors = self._filters.run(extra, state, ctx, steps, ages)
            violations.update(more)
            factors.update(more_factors)
            if pool:
                fb.empty = "fallback_model"
                return pool, specs
        too_small: list[str] = []
        if pol.on_empty == "fail_open":  # over the candidates that can hold the request: a fact of it, not state
            need = ctx.features.est_input_tokens + (ctx.features.max_tokens or 0)
            fits = [s for s in specs if need <= s.context_window]
            too_small = [s.id for s in specs if need > s.context_window]
            pool = self._filters.prepare(fits, state, ctx, ages)
            if not pool:
                largest = max((s.context_window for s in specs), default=0)
                fb.note(f"no feasible instance, and no candidate's context window holds the request (~{need} "
                        f"tokens, the largest is {largest}): not failing open", RoutingMode.SAFE)
                fb.empty = CONTEXT_LENGTH_EXCEEDED
            else:
                fb.note("no feasible instance; failing open over " + (
                    f"the candidates whose context window holds ~{need} tokens" if too_small else "all candidates"),
                    RoutingMode.FAIL_OPEN)
                fb.empty = "fail_open"
        else:
            pool = []
            fb.note("no feasible instance; rejecting (on_empty: reject)", RoutingMode.SAFE)
            fb.empty = "reject"
        steps.add("fallback", StepKind.FALLBACK, reason=fb.reason or "", instances=[p.candidate.spec.id for p in pool],
                  rejected=too_small)
        return pool, specs
