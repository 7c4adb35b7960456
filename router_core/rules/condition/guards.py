"""What must hold for a condition to be true, in a form one lookup can test for every rule at once.

A condition's *guards* are atoms of the shapes ``feature == const``, ``feature in [..]`` and
``feature <op> number`` such that the condition can be true only when at least one of them is: an
atom guards itself, an ``||`` needs a guard from every side (the union), an ``&&`` needs one side's
(the fewest, equality first). ``None`` means unguarded: the condition may hold whatever the indexed
features say (a ``!``, a prompt test, two features compared). Guards only narrow which rules are
evaluated (:mod:`router_core.rules.index`); the closures still decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from router_core.rules.condition.features import Getter

__all__ = ["Guard", "Guards", "all_of", "any_of"]


@dataclass(frozen=True, slots=True)
class Guard:
    """One indexable atom.

    Attributes:
        feature: The feature's label (``input_length``, ``metadata.tier``): one label, one getter.
        get: Its getter.
        op: ``in`` (equality with one of ``consts``) or an ordering against the number ``consts[0]``.
        consts: The literal values.
    """

    feature: str
    get: Getter
    op: Literal["in", "<", "<=", ">", ">="]
    consts: tuple[Any, ...]


Guards = tuple[Guard, ...] | None


def any_of(parts: Sequence[Guards]) -> Guards:
    """An ``||``: some side must hold, so every side needs guards; their union guards the whole."""
    out: list[Guard] = []
    for part in parts:
        if part is None:
            return None
        out.extend(part)
    return tuple(out)


def all_of(parts: Sequence[Guards]) -> Guards:
    """An ``&&``: every side must hold, so one side's guards do; the fewest, equality before ordering."""
    guarded = [p for p in parts if p is not None]
    if not guarded:
        return None
    return min(guarded, key=lambda g: (len(g), any(x.op != "in" for x in g)))
