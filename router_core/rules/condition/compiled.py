"""A compiled condition: one closure to evaluate, and its atoms to explain a verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from router_core.rules.condition.features import Value
from router_core.rules.condition.guards import Guards
from router_core.rules.condition.ops import Pred
from router_core.rules.request import RequestView

__all__ = ["Atom", "CompiledCondition"]

_MAX_SHOWN = 60  # characters of a feature value an explanation shows


def show(value: Any) -> str:
    """Render a feature value for an explanation: JSON-like, cut at 60 characters."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    else:
        text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


@dataclass(frozen=True, slots=True)
class Atom:
    """One comparison, membership test or bare boolean of a condition.

    Attributes:
        text: The atom as written (whitespace runs across lines folded to one space).
        pred: Its closure.
        reads: The features it reads, shown with their values (the prompt is never among them).
    """

    text: str
    pred: Pred
    reads: tuple[Value, ...] = ()

    def explain(self, req: RequestView) -> str:
        """Return ``atom: true|false (feature=value, ...)``."""
        line = f"{self.text}: {'true' if self.pred(req) else 'false'}"
        if not self.reads:
            return line
        shown = ", ".join(f"{v.label}={'<redacted>' if v.secret else show(v.get(req) if v.get else None)}"
                          for v in self.reads)
        return f"{line} ({shown})"


class CompiledCondition:
    """A condition compiled to closures; implements :class:`router_core.rules.ir.Condition`.

    Attributes:
        text: The condition as written.
        features: The features (``input_length``, ``metadata.tier``) and functions (``header``,
            ``prompt_contains``, ``contains_legal_terms``) it reads.
        guards: Atoms of which one must hold for the condition to hold (None: unguarded); see
            :mod:`router_core.rules.condition.guards`.
    """

    __slots__ = ("_atoms", "_pred", "features", "guards", "text")

    def __init__(self, text: str, pred: Pred, atoms: Sequence[Atom], features: frozenset[str],
                 guards: Guards = None) -> None:
        self.text = text
        self.features = features
        self.guards = guards
        self._pred = pred
        self._atoms = tuple(atoms)

    def evaluate(self, req: RequestView) -> bool:
        """Return whether ``req`` satisfies the condition."""
        return self._pred(req)

    def explain(self, req: RequestView) -> list[str]:
        """Return one line per atom, in the order written: its verdict and the values it read."""
        return [atom.explain(req) for atom in self._atoms]

    def __repr__(self) -> str:
        return f"CompiledCondition({self.text!r})"
