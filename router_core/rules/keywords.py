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
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from schemas.config.keywords import KeywordScoring
from schemas.fleet import InstanceSnapshot
from schemas.trace_policy import KeywordMatch

__all__ = ["ASCII_CASE_TWINS", "KeywordResult", "KeywordScorer", "fold", "literal_alternatives"]

# The non-ASCII characters that re.IGNORECASE equates with an ASCII letter (the tests check this
# against the engine over every code point). Replacing them before str.lower() makes folding
# one character for one, so a folded substring test is exactly an IGNORECASE literal search.
ASCII_CASE_TWINS = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}  # İ ı ſ K (Kelvin)
_META = frozenset("\\.^$*+?{}[]()|")


def literal_alternatives(pattern: str, *, ignore_case: bool) -> tuple[tuple[str, ...], bool] | None:
    r"""The literals of a pattern that is only ``a|b|c`` (in at most one group), else None.

    Returns the literals and whether finding one is the whole match (True) or only necessary
    (False: the pattern is wrapped in ``\b`` word boundaries, which the regex still checks).
    Case-insensitive literals qualify only when each character is ASCII or an uncased letter
    (Unicode ``Lo``: Chinese, Japanese kana, Korean), where folding is exact; they come back lowered.
    """
    body, exact = pattern, True
    if body.startswith("\\b") and body.endswith("\\b") and len(body) > 4:
        body, exact = body[2:-2], False
    if body.startswith("(?:") and body.endswith(")"):
        body = body[3:-1]
    elif body.startswith("(") and not body.startswith("(?") and body.endswith(")"):
        body = body[1:-1]
    pieces = body.split("|")
    if any(not piece or _META.intersection(piece) for piece in pieces):
        return None
    if not ignore_case:
        return tuple(pieces), exact
    if not all(c.isascii() or unicodedata.category(c) == "Lo" for piece in pieces for c in piece):
        return None
    return tuple(piece.lower() for piece in pieces), exact


def fold(text: str) -> str:
    """Lower-case ``text`` one character for one, as re.IGNORECASE compares ASCII and uncased letters."""
    if not text.isascii():
        for twin, letter in ASCII_CASE_TWINS.items():
            if twin in text:
                text = text.replace(twin, letter)
    return text.lower()


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
    r"""Scores queries by a :class:`~schemas.config.keywords.KeywordScoring`; build once, call per request.

    A pattern that is a plain alternation of literals (the seed's three are) is decided by
    substring tests: on the query as is, or, case-insensitively, on one folded copy of it made
    once per query. Wrapped in ``\b``, the same test rules it out, and the regex runs only when a
    literal is there. Other patterns are searched with their compiled regex. Both give exactly what
    ``re.search(pattern, query, flags)`` gives. (One alternation joining every pattern was
    measured slower: CPython's engine then tries each alternative at each position, without the
    literal scan it uses for a single pattern.)
    """

    def __init__(self, config: KeywordScoring) -> None:
        self.config = config
        self._regexes = [re.compile(p.pattern, _flag_bits(p.flags)) for p in config.patterns]
        self._literals = [literal_alternatives(p.pattern, ignore_case="i" in p.flags) for p in config.patterns]
        self._folded = ["i" in p.flags for p in config.patterns]
        self._needs_fold = any(lit is not None and f for lit, f in zip(self._literals, self._folded, strict=True))
        self._matches = [KeywordMatch(pattern=p.pattern, weight=p.weight) for p in config.patterns]
        self._bonus = {b.intent: b for b in config.intent_bonus}

    @property
    def literal_patterns(self) -> int:
        """How many patterns are decided by substring tests rather than a regex search."""
        return sum(lit is not None for lit in self._literals)

    def _found(self, text: str) -> list[int]:
        folded = fold(text) if self._needs_fold else text
        found = []
        for i, (regex, literals, is_folded) in enumerate(zip(self._regexes, self._literals, self._folded, strict=True)):
            if literals is None:
                hit = regex.search(text) is not None
            else:
                needles, exact = literals
                hit = any(needle in (folded if is_folded else text) for needle in needles)
                hit = hit and (exact or regex.search(text) is not None)
            if hit:
                found.append(i)
        return found

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
