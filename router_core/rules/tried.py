"""The rules tried for one request, in order: each rule's verdict, and why the ones before the match failed.

Saying why a rule did not match costs a few microseconds a rule (its first failing atom found and
written out with its value), and the decision does not need it: only the trace's policy step reads
it, once the decision is made. So :class:`Tried` works the verdicts out when first read. Until then
it keeps the request view, which holds the prompt in memory (never in a verdict), for no longer
than the request; after, it lets go of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

from router_core.rules.request import RequestView

__all__ = ["ClauseVerdict", "Tried", "WhyNot"]

WhyNot = Callable[[RequestView], list[str]]
"""A rule's condition's ``why_not``: the atoms that failed it for a request it does not hold for."""


@dataclass(frozen=True, slots=True)
class ClauseVerdict:
    """One rule tried for a request: matched (every atom's verdict) or not (the atoms that failed it)."""

    rule: str
    matched: bool
    detail: list[str] = field(default_factory=list)


class Tried(Sequence[ClauseVerdict]):
    """The first ``upto`` rules of a rule set (none of which held), then the matching rule's verdict.

    Args:
        names: Every rule's name, in order.
        whys: Every rule's ``why_not``, in order.
        req: The request they were tried on.
        upto: How many rules failed before the match (all of them when none matched).
        last: The matching rule's verdict (None: no rule matched).
    """

    __slots__ = ("_last", "_names", "_req", "_upto", "_verdicts", "_whys")

    def __init__(self, names: Sequence[str], whys: Sequence[WhyNot], req: RequestView, upto: int,
                 last: ClauseVerdict | None) -> None:
        self._names, self._whys, self._upto, self._last = names, whys, upto, last
        self._req: RequestView | None = req
        self._verdicts: tuple[ClauseVerdict, ...] | None = None

    def _all(self) -> tuple[ClauseVerdict, ...]:
        verdicts = self._verdicts
        if verdicts is None:
            req, names, whys = self._req, self._names, self._whys
            assert req is not None
            missed = [ClauseVerdict(names[j], False, whys[j](req)) for j in range(self._upto)]
            verdicts = self._verdicts = tuple(missed if self._last is None else [*missed, self._last])
            self._req = None  # the prompt is not kept past the verdicts
        return verdicts

    def __len__(self) -> int:
        return self._upto + (self._last is not None)

    @overload
    def __getitem__(self, index: int) -> ClauseVerdict: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[ClauseVerdict, ...]: ...

    def __getitem__(self, index: int | slice) -> ClauseVerdict | tuple[ClauseVerdict, ...]:
        return self._all()[index]

    def __iter__(self) -> Iterator[ClauseVerdict]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._all() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, so not hashable as one

    def __repr__(self) -> str:
        return f"Tried({self._all()!r})"
