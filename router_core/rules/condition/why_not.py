"""Why a condition did not hold: the atoms that decided against it, each with what it read.

A false condition is blamed on atoms, walking its tree the way it was evaluated: a false ``&&`` on
its false sides (the first of them is where evaluation stopped), a false ``||`` on every side, a
``!`` on its operand the other way round. The first atom blamed is the one that failed first; when
only one is blamed, that atom alone turning is enough for the rule to match (every other side
already holds). Each blamed atom is told as the fact that held instead (:class:`Fact`)::

    request_time.hour = 17 not in [9, 11, 14, 16]
    input_length = 500 <= 8000
    intent = null != "legal"
    prompt_contains('紧急') did not match
    header('x-tenant') = <withheld: 26 chars, sha256:1a2b3c4d> != "gold-tenant"

The prompt is never shown: an atom over it says only whether its pattern matched. A header or
metadata value is shown only when the condition names it (:mod:`.disclose`): the lines are
stored in every trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from router_core.rules.condition.disclose import REDACTED, show
from router_core.rules.condition.features import Value
from router_core.rules.condition.ops import Pred
from router_core.rules.request import RequestView

__all__ = ["MORE", "NEGATED", "Blame", "Fact", "First", "Node", "blame_of", "first_of", "show"]

NEGATED = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<", "in": "not in", "not in": "in"}
_ORDERING = frozenset({"<", "<=", ">", ">="})
MORE = "(other atoms failed too)"
"""The line after the first atom that failed a rule when it was not the only one."""

# The atoms blamed for a node not having the wanted verdict: (atom index, the atom held).
Blame = Callable[[RequestView, bool], list[tuple[int, bool]]]
# The first of them, and whether it is the only one: (atom index, the atom held, alone).
# Called with ``alone``: whether the caller still needs to know (False: the answer's is False).
First = Callable[[RequestView, bool, bool], tuple[int, bool, bool]]


@dataclass(frozen=True, slots=True)
class Node:
    """A condition's tree as compiled: an atom (by its index in the condition's atoms) or an operator.

    Attributes:
        kind: ``atom``, ``and``, ``or`` or ``not``.
        pred: The node's predicate.
        children: The operands (none for an atom).
        atom: The atom's index (atoms only).
    """

    kind: Literal["atom", "and", "or", "not"]
    pred: Pred
    children: tuple[Node, ...] = ()
    atom: int = -1


@dataclass(frozen=True, slots=True)
class Fact:
    """How an atom that decided against its rule is told, precomputed when the condition compiles.

    The line is ``prefix + value + suffix``: ``request_time.hour = `` + ``17`` + `` not in [9, 11]``.

    Attributes:
        feature: The feature read, and how its value is shown (None: nothing is shown, as for a
            prompt test).
        prefix: ``<feature> = `` (or the atom's text when no value is shown).
        failed: The suffix when the atom was false but had to hold (the negated relation).
        held: The suffix when the atom held but had to be false (under a ``!``).
        ordering: ``<op> <number>`` of an ordering: a value that is no number reads ``(not <op> <number>)``.
        bare: A boolean standing alone: the value is the whole fact.
    """

    feature: Value | None
    prefix: str
    failed: str
    held: str
    ordering: str | None = None
    bare: bool = False

    @classmethod
    def compare(cls, feature: Value, op: str, rhs: Any) -> Fact:
        """``<feature> <op> <literal>`` (``rhs`` null: ``== null`` reads ``, not null``, ``!= null`` the null)."""
        prefix = f"{feature.label} = "
        if rhs is None:
            return cls(feature, prefix, ", not null" if op == "==" else "", "" if op == "==" else ", not null")
        shown = show(rhs)
        return cls(feature, prefix, f" {NEGATED[op]} {shown}", f" {op} {shown}",
                   f"{op} {shown}" if op in _ORDERING else None)

    @classmethod
    def member(cls, feature: Value, items: Sequence[Any], *, negated: bool) -> Fact:
        """``<feature> in [...]`` (``not in`` when ``negated``); the list as written, in order."""
        shown = "[" + ", ".join(show(i) for i in items) + "]"
        op = "not in" if negated else "in"
        return cls(feature, f"{feature.label} = ", f" {NEGATED[op]} {shown}", f" {op} {shown}")

    @classmethod
    def boolean(cls, feature: Value) -> Fact:
        """A boolean feature or metadata value standing alone (``has_attachments``, ``metadata.vip``)."""
        return cls(feature, f"{feature.label} = ", "", "", bare=True)

    @classmethod
    def pattern(cls, text: str) -> Fact:
        """A test of the prompt (``prompt_contains('x')``, ``contains_legal_terms(prompt)``): matched or not."""
        return cls(None, text, " did not match", " matched")

    def naming(self, named: Mapping[str, frozenset[Any]]) -> Fact:
        """This fact, showing the values ``named`` lists for its feature (see :meth:`Value.naming`)."""
        if self.feature is None:
            return self
        feature = self.feature.naming(named)
        return self if feature is self.feature else replace(self, feature=feature)

    def line(self, req: RequestView, held: bool) -> str:
        """The fact for ``req``: the value read and the relation it had (``held``: the atom was true)."""
        suffix = self.held if held else self.failed
        feature = self.feature
        if feature is None or feature.get is None:
            return self.prefix + suffix
        if feature.exposure == "secret":
            return self.prefix + REDACTED + suffix
        value = feature.get(req)
        if type(value) is int and feature.exposure == "shown":  # the common case (lengths, hours): as is, ordered
            return f"{self.prefix}{value}{suffix}"
        shown = feature.shown(value, req.fingerprint_key)
        if not held and self.ordering is not None and not _is_number(value):
            return f"{self.prefix}{shown} (not {self.ordering})"  # null, a string, NaN: no order to state
        if self.bare and not held and not isinstance(value, bool):
            return f"{self.prefix}{shown}, not true"  # a metadata value holds only when exactly true
        return self.prefix + shown + suffix


def _is_number(value: Any) -> bool:
    """An int or a float other than NaN (a bool is no number here: it has no order to state)."""
    return type(value) is int or (type(value) is float and value == value)


def blame_of(node: Node) -> Blame:
    """The closure that blames a node's atoms when its verdict is not the wanted one (only then called)."""
    if node.kind == "atom":
        index = node.atom
        return lambda req, want: [(index, not want)]
    if node.kind == "not":
        inner = blame_of(node.children[0])
        return lambda req, want: inner(req, not want)
    parts = tuple((child.pred, blame_of(child)) for child in node.children)
    # A false && (a true ||) is blamed on the sides that had that verdict, in order; a true &&
    # (a false ||) on every side: each had it.
    some = node.kind == "and"

    def blame(req: RequestView, want: bool) -> list[tuple[int, bool]]:
        out: list[tuple[int, bool]] = []
        if some == want:
            for pred, inner in parts:
                if pred(req) != want:
                    out += inner(req, want)
        else:
            for _, inner in parts:
                out += inner(req, want)
        return out

    return blame


def first_of(node: Node) -> First:
    """The closure that finds the first atom :func:`blame_of` would blame, and whether it is the only one.

    It evaluates no more than that needs: a false ``||`` (every side false) is never blamed on one
    atom, so only its first side is walked; a false ``&&`` is walked to its first false side, then
    its other sides are evaluated only when that side's atom is alone so far.
    """
    if node.kind == "atom":
        index = node.atom
        return lambda req, want, alone: (index, not want, alone)
    if node.kind == "not":
        inner = first_of(node.children[0])
        return lambda req, want, alone: inner(req, not want, alone)
    preds = tuple(child.pred for child in node.children)
    firsts = tuple(first_of(child) for child in node.children)
    some = node.kind == "and"

    def first(req: RequestView, want: bool, alone: bool) -> tuple[int, bool, bool]:
        if some != want:  # every side had the verdict: blamed on all of them, the first side first
            return firsts[0](req, want, False)
        for k, pred in enumerate(preds):
            if pred(req) != want:
                index, held, alone = firsts[k](req, want, alone)
                if alone:
                    for later in preds[k + 1:]:
                        if later(req) != want:
                            return index, held, False
                return index, held, alone
        raise AssertionError("first_of is asked only about a node without the wanted verdict")  # pragma: no cover

    return first
