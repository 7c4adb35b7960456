"""Closures a condition compiles to: one Python function per atom, combined with and/or/not.

No tree is walked per request: ``input_length > 8000`` becomes ``lambda r: get(r) > 8000``. A
comparison that reads None is false (``== null``/``!= null`` aside); a metadata value of a type the
comparison cannot take (``"gold" > 3``) is false too, not an exception in the router.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

from router_core.rules.condition.features import Getter
from router_core.rules.request import RequestView

__all__ = ["MIRROR", "OPS", "Pred", "all_of", "any_of", "compare", "compare_const", "constant", "is_null", "member",
           "negate", "truthy"]

Pred = Callable[[RequestView], bool]

OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_EQUALITY = frozenset({"==", "!="})
# ``3 < x`` is ``x > 3``: a literal on the left is moved right, so the fast closures apply.
MIRROR = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def constant(value: bool) -> Pred:
    """Return a predicate that ignores the request."""
    return (lambda req: True) if value else (lambda req: False)


def _guard(pred: Pred) -> Pred:
    """Turn a TypeError (a metadata value of the wrong type) into false."""

    def guarded(req: RequestView) -> bool:
        try:
            return pred(req)
        except TypeError:
            return False

    return guarded


def compare_const(get: Getter, op: str, const: Any, *, nullable: bool, checked: bool) -> Pred:
    """Return ``get(r) <op> const``; false when the value is None (``checked``: types known to match).

    ``==`` and ``!=`` need no guard: they never raise on JSON values, whatever the types.
    """
    fn = OPS[op]
    if not nullable or (op == "==" and const is not None):  # None == const is already false
        pred: Pred = lambda req: fn(get(req), const)  # noqa: E731 (the fastest form)
    else:

        def pred(req: RequestView) -> bool:
            value = get(req)
            return value is not None and fn(value, const)

    return pred if checked or op in _EQUALITY else _guard(pred)


def compare(left: Getter, op: str, right: Getter, *, checked: bool) -> Pred:
    """Return ``left(r) <op> right(r)``; false when either is None."""
    fn = OPS[op]

    def pred(req: RequestView) -> bool:
        a, b = left(req), right(req)
        return a is not None and b is not None and fn(a, b)

    return pred if checked else _guard(pred)


def is_null(get: Getter, negated: bool) -> Pred:
    """Return ``get(r) == null`` (or ``!= null``)."""
    if negated:
        return lambda req: get(req) is not None
    return lambda req: get(req) is None


def member(get: Getter, values: frozenset[Any], *, negated: bool, checked: bool) -> Pred:
    """Return ``get(r) in values`` (``not in`` when ``negated``); false when the value is None."""
    if negated:

        def pred(req: RequestView) -> bool:
            value = get(req)
            return value is not None and value not in values
    else:

        def pred(req: RequestView) -> bool:
            return get(req) in values  # None is never in a typed list

    return pred if checked else _guard(pred)


def truthy(get: Getter) -> Pred:
    """Return whether the value is exactly ``True`` (a bare metadata atom)."""
    return lambda req: get(req) is True


def negate(pred: Pred) -> Pred:
    """Return ``not pred``."""
    return lambda req: not pred(req)


def all_of(preds: Sequence[Pred]) -> Pred:
    """Return the short-circuit conjunction (unrolled for two and three atoms)."""
    if len(preds) == 2:
        a, b = preds
        return lambda req: a(req) and b(req)
    if len(preds) == 3:
        a, b, c = preds
        return lambda req: a(req) and b(req) and c(req)
    ps = tuple(preds)
    return lambda req: all(p(req) for p in ps)


def any_of(preds: Sequence[Pred]) -> Pred:
    """Return the short-circuit disjunction (unrolled for two and three atoms)."""
    if len(preds) == 2:
        a, b = preds
        return lambda req: a(req) or b(req)
    if len(preds) == 3:
        a, b, c = preds
        return lambda req: a(req) or b(req) or c(req)
    ps = tuple(preds)
    return lambda req: any(p(req) for p in ps)
