"""Rule-enhanced keyword scoring (seed 003 §2.1), compiled once from ``routing.keywords``.

::

    raw   = Σ weight of each pattern found in query[:max_chars]  +  the intent's bonus (if any)
    score = raw × factor   when the target's mean <metric> is above ``load_adjust.above``
    routed_to = target if score >= threshold else otherwise

The query is searched in memory and never kept: the result names the configured patterns that
matched (config, not prompt), the bonus, the load value and factor, and the model.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from schemas.fleet import InstanceSnapshot
from schemas.keywords_config import KeywordScoring
from schemas.trace_policy import KeywordMatch

__all__ = ["KeywordResult", "KeywordScorer"]

# A numbered back-reference or conditional would point at the wrong group once patterns are
# joined into one alternation; such a set is searched pattern by pattern instead.
_NOT_JOINABLE = re.compile(r"\\[1-9]|\(\?\(")


def _flag_bits(flags: str) -> int:
    return (re.I if "i" in flags else 0) | (re.M if "m" in flags else 0) | (re.S if "s" in flags else 0)


@dataclass(frozen=True, slots=True)
class KeywordResult:
    """What keyword scoring concluded for one query.

    Attributes:
        score: The final score (after the load adjustment), rounded to 6 decimals.
        raw: The score before the load adjustment (patterns plus intent bonus).
        matches: Each configured pattern that matched, with its weight, in configuration order.
        intent_bonus: The bonus added for the intent (None: none applied).
        load_factor: The factor the score was multiplied by (None: not adjusted).
        load_value: The observed load (mean of the gauge; None: no data or no load_adjust).
        routed_to: ``target``, ``otherwise``, or None (below threshold with no ``otherwise``).
        reason: One line naming the patterns, bonus and load, never quoting the query.
    """

    score: float
    raw: float
    matches: tuple[KeywordMatch, ...]
    intent_bonus: float | None
    load_factor: float | None
    load_value: float | None
    routed_to: str | None
    reason: str


class KeywordScorer:
    """Scores queries by a :class:`~schemas.keywords_config.KeywordScoring`; build once, call per request.

    The patterns are joined into one alternation, each wrapped in its own group: when it finds
    nothing (most traffic), no pattern can match and that single pass is the whole cost. When it
    finds something, ``finditer`` proves some patterns; the rest are searched alone from the first
    hit on (an alternation reports one alternative per position, so overlapping matches could hide
    one). The result is exactly that of searching each pattern on its own.
    """

    def __init__(self, config: KeywordScoring) -> None:
        self.config = config
        self._singles = [re.compile(p.pattern, _flag_bits(p.flags)) for p in config.patterns]
        self._matches = [KeywordMatch(pattern=p.pattern, weight=p.weight) for p in config.patterns]
        self._bonus = {b.intent: b for b in config.intent_bonus}
        self._joined: re.Pattern[str] | None = None
        self._group_to_index: dict[int, int] = {}
        if not any(_NOT_JOINABLE.search(p.pattern) for p in config.patterns):
            self._join()

    @property
    def is_joined(self) -> bool:
        """Whether the patterns are searched as one alternation (False: one by one)."""
        return self._joined is not None

    def _join(self) -> None:
        group, parts = 1, []
        for index, (spec, single) in enumerate(zip(self.config.patterns, self._singles, strict=True)):
            self._group_to_index[group] = index
            parts.append(f"((?{spec.flags}:{spec.pattern}))" if spec.flags else f"({spec.pattern})")
            group += 1 + single.groups
        try:
            self._joined = re.compile("|".join(parts))
        except re.error:  # e.g. a group name used by two patterns, or a global inline flag
            self._joined, self._group_to_index = None, {}

    def _found(self, text: str) -> list[int]:
        if self._joined is None:
            return [i for i, single in enumerate(self._singles) if single.search(text)]
        first = self._joined.search(text)
        if first is None:
            return []
        seen = {self._group_to_index[m.lastindex] for m in self._joined.finditer(text, first.start()) if m.lastindex}
        start = first.start()
        return [i for i, single in enumerate(self._singles) if i in seen or single.search(text, start)]

    @staticmethod
    def _load(metric: str, snapshots: Mapping[str, InstanceSnapshot], instances: Sequence[str]) -> float | None:
        values: list[float] = []
        for instance in instances:
            snap = snapshots.get(instance)
            value = None if snap is None or snap.stale else getattr(snap, metric)
            if value is not None:
                values.append(float(value))
        return sum(values) / len(values) if values else None

    def score(
        self,
        text: str,
        *,
        intent: str | None,
        intent_confidence: float | None,
        snapshots: Mapping[str, InstanceSnapshot],
        instances_of_target: Sequence[str],
    ) -> KeywordResult:
        """Score ``text`` (the last user message) and say which model it routes to.

        Args:
            text: The query; only its first ``max_chars`` characters are searched.
            intent: The request's intent label (None: abstained or unknown).
            intent_confidence: Its confidence in [0, 1] (None: no intent).
            snapshots: Instance id -> snapshot at decision time.
            instances_of_target: The target model's instance ids (whose load is read).

        Returns:
            The score, its parts and the model routed to.
        """
        cfg = self.config
        found = self._found(text[: cfg.max_chars])
        matches = tuple(self._matches[i] for i in found)
        raw = sum(m.weight for m in matches)
        named = " and ".join(f"{m.pattern!r} ({m.weight:+g})" for m in matches)
        parts = [f"matched {named}" if matches else "no pattern matched"]

        bonus = None
        rule = self._bonus.get(intent) if intent is not None else None
        if rule is not None and intent_confidence is not None and intent_confidence > rule.min_confidence:
            bonus = rule.bonus
            raw += bonus
            parts.append(f"intent {intent} {intent_confidence:.2f} > {rule.min_confidence:g} ({bonus:+g})")

        score, factor, load = raw, None, None
        adjust = cfg.load_adjust
        if adjust is not None:
            load = self._load(adjust.metric, snapshots, instances_of_target)
            if load is None:
                parts.append(f"no {adjust.metric} for {cfg.target}: not load-adjusted")
            elif load > adjust.above:
                factor = adjust.factor
                score = raw * factor
                parts.append(f"{adjust.metric} {load:.2f} > {adjust.above:g} on {cfg.target} (x{factor:g})")
            else:
                parts.append(f"{adjust.metric} {load:.2f} <= {adjust.above:g} on {cfg.target}: not load-adjusted")

        raw, score = round(raw, 6), round(score, 6)
        routed_to = cfg.target if score >= cfg.threshold else cfg.otherwise
        cmp = ">=" if score >= cfg.threshold else "<"
        parts.append(f"score {score:g} {cmp} {cfg.threshold:g} -> {routed_to or 'normal routing'}")
        return KeywordResult(score, raw, matches, bonus, factor, load, routed_to, "; ".join(parts))
