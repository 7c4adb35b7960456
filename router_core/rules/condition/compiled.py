"""A compiled condition: one closure to evaluate, and its atoms to explain a verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from router_core.rules.condition.features import Value
from router_core.rules.condition.guards import Guards
from router_core.rules.condition.ops import Pred
from router_core.rules.condition.why_not import MORE, Blame, Fact, First, Node, blame_of, first_of
from router_core.rules.request import RequestView

__all__ = ["Atom", "CompiledCondition"]

@dataclass(frozen=True, slots=True)
class Atom:
    """One comparison, membership test or bare boolean of a condition.

    Attributes:
        text: The atom as written (whitespace runs across lines folded to one space).
        pred: Its closure.
        reads: The features it reads, shown with their values as :mod:`.disclose` allows (the
            prompt is never among them).
        fact: How it is told when it decided against its rule (None: as its verdict and values).
    """

    text: str
    pred: Pred
    reads: tuple[Value, ...] = ()
    fact: Fact | None = None

    def naming(self, named: Mapping[str, frozenset[Any]]) -> Atom:
        """This atom, showing the header and metadata values ``named`` lists for their features."""
        fact = None if self.fact is None else self.fact.naming(named)
        return replace(self, reads=tuple(v.naming(named) for v in self.reads), fact=fact)

    def explain(self, req: RequestView) -> str:
        """Return ``atom: true|false (feature=value, ...)``."""
        return self._with_values(f"{self.text}: {'true' if self.pred(req) else 'false'}", req, "=")

    def against(self, req: RequestView, held: bool) -> str:
        """The fact that held instead of what the rule needed (``held``: the atom was true, under a ``!``)."""
        if self.fact is not None:
            return self.fact.line(req, held)
        return self._with_values(f"{self.text} is {'true' if held else 'false'}", req, " = ")

    def _with_values(self, line: str, req: RequestView, eq: str) -> str:
        """``line``, then the values the atom read (``label<eq>value``; withheld or redacted as need be)."""
        if not self.reads:
            return line
        key = req.fingerprint_key
        shown = ", ".join(f"{v.label}{eq}{v.shown(v.get(req) if v.get else None, key)}" for v in self.reads)
        return f"{line} ({shown})"


class CompiledCondition:
    """A condition compiled to closures; implements :class:`router_core.rules.ir.Condition`.

    Attributes:
        text: The condition as written.
        features: The features (``input_length``, ``metadata.tier``) and functions (``header``,
            ``prompt_contains``, ``contains_legal_terms``) it reads.
        guards: Atoms of which one must hold for the condition to hold (None: unguarded); see
            :mod:`router_core.rules.condition.guards`.
        tree: The condition's tree over its atoms, with each node's predicate.
    """

    __slots__ = ("_against", "_atoms", "_blame", "_first", "_pred", "features", "guards", "text", "tree")

    def __init__(self, text: str, pred: Pred, atoms: Sequence[Atom], features: frozenset[str],
                 guards: Guards = None, tree: Node | None = None) -> None:
        self.text = text
        self.features = features
        self.guards = guards
        self._pred = pred
        self._atoms = tuple(atoms)
        self._against = tuple(a.against if a.fact is None else a.fact.line for a in self._atoms)
        self.tree = tree if tree is not None else Node("atom", pred, atom=0)
        self._blame: Blame = blame_of(self.tree)
        self._first: First = first_of(self.tree)

    def evaluate(self, req: RequestView) -> bool:
        """Return whether ``req`` satisfies the condition."""
        return self._pred(req)

    def explain(self, req: RequestView) -> list[str]:
        """Return one line per atom, in the order written: its verdict and the values it read.

        A header or metadata value is shown only when the condition compares it against that very
        literal; otherwise its size and fingerprint (:mod:`.disclose`): the lines are stored.
        """
        return [atom.explain(req) for atom in self._atoms]

    def why_not(self, req: RequestView, *, every: bool = False) -> list[str]:
        """Return, for a request it does not hold for, the atom that failed it first, with the value it read.

        The line is the fact that held instead (:mod:`.why_not`), its value shown as :meth:`explain`
        shows it. When other atoms failed too, a second line says so (:data:`MORE`); without it,
        that atom alone turning would have made the condition hold. ``every``: one line for each
        atom that failed, the first first.
        """
        against = self._against
        if every:
            return [against[i](req, held) for i, held in self._blame(req, True)]
        index, held, alone = self._first(req, True, True)
        line = against[index](req, held)
        return [line] if alone else [line, MORE]

    def __repr__(self) -> str:
        return f"CompiledCondition({self.text!r})"
