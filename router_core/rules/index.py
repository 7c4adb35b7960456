"""Which rules of a set can match a request, from a few lookups instead of one closure per rule.

Each rule's condition carries guards (:mod:`router_core.rules.condition.guards`): atoms one of which
must hold for it to match. The index reads each guarded feature once per request and gives the
rules whose guards may hold, as a bit mask in rule order: equality and ``in`` through a dict from
value to rules, orderings through the sorted constants of each feature and operator. A rule
without guards is always a candidate. A value the lookups cannot judge exactly (a metadata list,
a string compared with a number, NaN) makes every rule guarded on that feature a candidate, so the
candidates are always a superset of the rules that match: the closures still decide, in order.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from router_core.rules.condition.features import Getter
from router_core.rules.condition.guards import Guards
from router_core.rules.request import RequestView

__all__ = ["RuleIndex", "guards_of"]

_NUMBERS = (int, float)  # bool is not among them: True > 0 is a question the closure answers


@dataclass(frozen=True, slots=True)
class _Equal:
    get: Getter
    masks: dict[Any, int]  # value -> rules with ``feature == value`` or ``feature in [.., value, ..]``
    every: int

    def candidates(self, req: RequestView) -> int:
        value = self.get(req)
        try:
            return self.masks.get(value, 0)
        except TypeError:  # unhashable (a metadata list or object): equal to no literal, but let the closures say
            return self.every


@dataclass(frozen=True, slots=True)
class _Ordered:
    get: Getter
    bounds: list[Any]  # the constants, ascending
    masks: list[int]  # masks[j]: the rules the lookup position j selects
    find: Callable[[list[Any], Any], int]
    every: int

    def candidates(self, req: RequestView) -> int:
        value = self.get(req)
        if value is None:
            return 0  # an ordering with null is false
        if type(value) not in _NUMBERS or value != value:
            return self.every
        return self.masks[self.find(self.bounds, value)]


class RuleIndex:
    """Candidate rules per request, as an int whose bit ``i`` is rule ``i``.

    Args:
        guards: Per rule in order, its condition's guards (None: always a candidate).
    """

    __slots__ = ("_always", "_lookups")

    def __init__(self, guards: Sequence[Guards]) -> None:
        self._always = 0
        equal: dict[str, tuple[Getter, dict[Any, int]]] = {}
        ordered: dict[tuple[str, str], tuple[Getter, list[tuple[Any, int]]]] = {}
        for i, rule_guards in enumerate(guards):
            bit = 1 << i
            if rule_guards is None:
                self._always |= bit
                continue
            for g in rule_guards:
                if g.op == "in":
                    table = equal.setdefault(g.feature, (g.get, {}))[1]
                    for const in g.consts:
                        table[const] = table.get(const, 0) | bit
                else:
                    ordered.setdefault((g.feature, g.op), (g.get, []))[1].append((g.consts[0], bit))
        lookups: list[_Equal | _Ordered] = [_Equal(get, masks, _union(masks.values()))
                                            for get, masks in equal.values()]
        lookups += [_ordered(get, op, pairs) for (_, op), (get, pairs) in ordered.items()]
        self._lookups = tuple(lookups)

    def candidates(self, req: RequestView) -> int:
        """The rules that may match ``req`` (every rule that does is among them)."""
        mask = self._always
        for lookup in self._lookups:
            mask |= lookup.candidates(req)
        return mask


def _union(masks: Any) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _ordered(get: Getter, op: str, pairs: list[tuple[Any, int]]) -> _Ordered:
    """``feature op K`` for each (K, rule): the rules holding for a value are a prefix or a suffix in K order.

    ``>``: K < v, the first ``bisect_left`` constants; ``>=``: K <= v, ``bisect_right``; ``<``: K > v,
    from ``bisect_right`` on; ``<=``: K >= v, from ``bisect_left`` on.
    """
    pairs = sorted(pairs, key=lambda p: p[0])
    bounds = [k for k, _ in pairs]
    n = len(pairs)
    if op in (">", ">="):
        masks = [0] * (n + 1)
        for j, (_, bit) in enumerate(pairs):
            masks[j + 1] = masks[j] | bit
    else:
        masks = [0] * (n + 1)
        for j in range(n - 1, -1, -1):
            masks[j] = masks[j + 1] | pairs[j][1]
    find = bisect_left if op in (">", "<=") else bisect_right
    return _Ordered(get, bounds, masks, find, masks[n] if op in (">", ">=") else masks[0])


def guards_of(condition: object) -> Guards:
    """A condition's guards (None for none, or a condition that declares none: always a candidate)."""
    guards: Guards = getattr(condition, "guards", None)
    return guards
