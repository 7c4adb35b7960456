"""The one compiled form of a routing policy: rules in order, each a condition and what to do.

The matrix loader and the DSL compiler both produce a :class:`RuleSet`; the router runs it and the
trace records which rule matched and the clauses tried before it. Everything here is immutable and
does no I/O, so a rule set can be swapped on hot reload by replacing one reference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from router_core.rules.index import RuleIndex, guards_of
from router_core.rules.request import RequestView
from router_core.rules.tried import ClauseVerdict, Tried, WhyNot
from schemas.config.routing import in_hours

__all__ = [
    "ClauseVerdict",
    "Condition",
    "CostParams",
    "DegradedTarget",
    "Match",
    "Origin",
    "ResourceGuarantee",
    "Rule",
    "RuleSet",
    "Throttle",
    "TimeoutPolicy",
]


class Condition(Protocol):
    """A compiled condition (see :mod:`router_core.rules.condition`)."""

    text: str

    def evaluate(self, req: RequestView) -> bool:
        """Return whether the request satisfies the condition."""
        ...

    def explain(self, req: RequestView) -> list[str]:
        """Return one line per atom: the atom, its verdict and the feature values it read.

        Never the prompt: ``prompt_contains('x')`` says only true or false.
        """
        ...

    def why_not(self, req: RequestView, *, every: bool = False) -> list[str]:
        """For a request the condition does not hold for: the atom that failed it first, with its value.

        The line is the fact that held instead (``request_time.hour = 17 not in [9, 11, 14, 16]``),
        never the prompt (``prompt_contains('x') did not match``); a second line says when other
        atoms failed too. ``every``: a line for each atom that failed.
        """
        ...


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a rule was written: file, 1-based line and column."""

    source: str
    line: int
    col: int = 1

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Throttle:
    """A token bucket per rule (or per shared ``bucket`` name).

    ``rate`` tokens a second refill a bucket of ``burst`` tokens (the matrix's ``max_rps`` and
    ``max_rps * burst_window``). A request that finds it empty goes down the chain (``chain``),
    gets a 429 with ``Retry-After`` (``reject``), or waits up to ``max_wait_s`` for a token,
    higher ``priority`` first (``wait``).
    """

    rate: float
    burst: float
    overflow: Literal["chain", "reject", "wait"] = "chain"
    max_wait_s: float = 0.0
    bucket: str | None = None


@dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """Per-attempt timeout, and the pause before the next attempt."""

    initial_timeout_s: float
    retry_backoff_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ResourceGuarantee:
    """Feasibility bounds a rule adds: free KV-cache bytes and free sequence slots per instance."""

    min_free_kv_bytes: float | None = None
    min_free_slots: int | None = None


@dataclass(frozen=True, slots=True)
class CostParams:
    """Scale the cost term for a rule's requests: ``base_weight``, times ``surge_multiplier`` in peak hours."""

    base_weight: float = 1.0
    surge_multiplier: float = 1.0


@dataclass(frozen=True, slots=True)
class DegradedTarget:
    """A non-LLM end of a fallback chain: a responder URL (OpenAI-shaped) or a canned answer."""

    name: str
    url: str | None = None
    canned: str | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One routing rule.

    Attributes:
        name: ``rule_name`` (the DSL names its clauses ``clause-1``, ``clause-2``...).
        condition: When it applies (None: always, an ``ELSE``).
        primary: The model to route to (None: every model, scored as usual).
        chain: Next targets in order: model names or :class:`DegradedTarget` names.
        priority: Higher waits less when a shared bucket is throttled (``high`` = 2, ``normal`` = 1, ``low`` = 0).
        requires: Instance features a target instance must declare (the DSL's ``compression="flash-attn"``).
        spots: Where the DSL wrote what the loader checks against the fleet, as (what, line, column):
            ``primary_target``, ``fallback_chain.<j>`` and ``compression``, so that an unknown
            target is reported at its literal, not at the clause's ``IF`` (a matrix rule's are
            found in the YAML).
    """

    name: str
    origin: Origin
    condition: Condition | None = None
    primary: str | None = None
    chain: tuple[str, ...] = ()
    priority: int = 1
    throttle: Throttle | None = None
    timeout: TimeoutPolicy | None = None
    guarantee: ResourceGuarantee | None = None
    cost: CostParams | None = None
    requires: tuple[str, ...] = ()
    spots: tuple[tuple[str, int, int], ...] = field(default=(), compare=False, repr=False)

    def spot(self, what: str) -> tuple[int, int]:
        """Where the rule wrote ``what`` (see :attr:`spots`); else where the rule starts."""
        for name, line, col in self.spots:
            if name == what:
                return line, col
        return self.origin.line, self.origin.col


def _never(req: RequestView) -> list[str]:
    return []  # a rule without a condition: it always matches, so it is never asked why not


@dataclass(frozen=True, slots=True)
class Match:
    """The rule that applies (None: no rule matched) and every rule tried up to it, in order."""

    rule: Rule | None
    tried: Sequence[ClauseVerdict]


@dataclass(frozen=True)
class RuleSet:
    """Rules in order (first match wins), the targets they may name, and a content hash.

    Attributes:
        rules: The rules, matrix entries first, then DSL clauses.
        source: The policy file's name.
        text: Its text (hashed).
        degraded: Non-LLM targets by name.
        model_fallbacks: A model's chain when a rule names none.
        timezone: Where ``request_time`` is read.
        peak_hours: ``[start, end)`` local hours in which ``surge_multiplier`` applies.
        cases: The file's own test cases (``schemas.policy_file.PolicyCase``).
    """

    rules: tuple[Rule, ...]
    source: str
    text: str = field(repr=False, default="")
    degraded: dict[str, DegradedTarget] = field(default_factory=dict)
    model_fallbacks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    timezone: str = "UTC"
    peak_hours: tuple[tuple[int, int], ...] = ()
    cases: tuple[Any, ...] = field(default=(), repr=False)
    _tests: tuple[Callable[[RequestView], bool] | None, ...] = field(init=False, repr=False, compare=False)
    _whys: tuple[WhyNot, ...] = field(init=False, repr=False, compare=False)
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _index: RuleIndex = field(init=False, repr=False, compare=False)

    def chain_of(self, rule: Rule) -> tuple[str, ...]:
        """The rule's fallback chain, else its primary model's ``model_fallbacks`` entry."""
        if rule.chain or rule.primary is None:
            return rule.chain
        return self.model_fallbacks.get(rule.primary, ())

    def in_peak(self, hour: int) -> bool:
        """Whether a local ``hour`` is in a peak band."""
        return any(in_hours(hour, a, b) for a, b in self.peak_hours)

    @property
    def hash(self) -> str:
        """A short hash of the policy text (recorded with the policy hash)."""
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()[:16]

    def __post_init__(self) -> None:
        # The request path's loop: one evaluate per rule (None: always), and why each rule before
        # the match did not (a rule without a condition always matches: it is never among them).
        object.__setattr__(self, "_tests", tuple(None if r.condition is None else r.condition.evaluate
                                                 for r in self.rules))
        object.__setattr__(self, "_whys", tuple(_never if r.condition is None else r.condition.why_not
                                                for r in self.rules))
        object.__setattr__(self, "_names", tuple(r.name for r in self.rules))
        # Which rules can match, from one lookup per guarded feature (router_core.rules.index): the
        # others are not evaluated, and are listed as not matched, as they would have been.
        object.__setattr__(self, "_index", RuleIndex([guards_of(r.condition) for r in self.rules]))

    def match(self, req: RequestView, *, explain: Literal["matched", "all"] = "matched") -> Match:
        """Return the first rule whose condition holds, and the rules tried before it.

        Every rule tried before the match (all of them when none matches) is listed with the atom
        that failed it first and the value it read (:meth:`Condition.why_not`); the matching rule
        with every atom's verdict (:meth:`Condition.explain`). ``explain="matched"`` (the request
        path) evaluates the conditions of only the rules the index cannot rule out, until one
        holds, and works out why the others failed only when the verdicts are read
        (:class:`router_core.rules.tried.Tried`). ``"all"`` (dry runs, ``routelens policy
        explain``) evaluates every rule in order and lists every atom that failed each.
        """
        if explain == "all":
            return self._match_explained(req)
        tests = self._tests
        mask = self._index.candidates(req)
        while mask:
            low = mask & -mask
            i = low.bit_length() - 1
            test = tests[i]
            if test is None or test(req):
                rule = self.rules[i]
                detail = [] if rule.condition is None else rule.condition.explain(req)
                return Match(rule, Tried(self._names, self._whys, req, i, ClauseVerdict(rule.name, True, detail)))
            mask ^= low
        return Match(None, Tried(self._names, self._whys, req, len(self.rules), None))

    def _match_explained(self, req: RequestView) -> Match:
        tried: list[ClauseVerdict] = []
        for rule in self.rules:
            cond = rule.condition
            ok = cond is None or cond.evaluate(req)
            detail = [] if cond is None else cond.explain(req) if ok else cond.why_not(req, every=True)
            tried.append(ClauseVerdict(rule.name, ok, detail))
            if ok:
                return Match(rule, tuple(tried))
        return Match(None, tuple(tried))
