"""Features that take only some values: a literal compared against one outside them is a mistake.

``request_time.hour in [9, 25]`` can never be 25, and ``request_time.hour > 30`` never holds: the
rule is silently dead (or, for ``!=`` and an always-true ordering, silently always on). The
compiler asks :func:`out_of_domain` about each literal a bounded feature is compared with, and
reports the answer at the literal, as it reports a type error. So with strings: ``language`` is
one of the analyser's four (``language == "ZH"`` or ``"chinese"`` never holds), and ``file_type``
is a short lower-case name with aliases folded, as the gateway types attachments (``"PDF"``,
``"jpeg"`` and ``".pdf"`` never are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router_core.rules.condition.ops import OPS
from schemas.common import Language
from schemas.config.attachments import NAMED_TYPES, UNKNOWN_TYPE, normalise_type

__all__ = ["DOMAINS", "WORDS", "Domain", "out_of_domain"]

_EQUALITY = frozenset({"==", "!=", "in", "not in"})


@dataclass(frozen=True, slots=True)
class Domain:
    """The whole numbers ``low`` to ``high`` (inclusive); ``note`` says what they mean, when it is not obvious."""

    low: int
    high: int
    note: str = ""

    def __str__(self) -> str:
        return f"a whole number from {self.low} to {self.high}" + (f" ({self.note})" if self.note else "")

    def holds(self, value: Any) -> bool:
        """Whether ``value`` is one of the domain's numbers (``9.0`` is 9)."""
        return float(value).is_integer() and self.low <= value <= self.high


# By the feature's label (``request_time`` has .hour and .weekday: datetime.hour and datetime.weekday()).
DOMAINS: dict[str, Domain] = {
    "request_time.hour": Domain(0, 23),
    "request_time.weekday": Domain(0, 6, "Monday 0 .. Sunday 6"),
}


# Features whose strings are a closed set (the analyser's languages): any other literal is a dead rule.
WORDS: dict[str, tuple[str, ...]] = {"language": tuple(lang.value for lang in Language)}


def _word(label: str, op: str, const: str) -> str | None:
    """Why comparing a string feature with ``const`` never (or always) holds; None when it may hold."""
    if label == "file_type":  # types are short lower-case names, aliases folded (schemas.config.attachments)
        spelled = normalise_type(const)
        if not spelled:
            return None
        if spelled != const:
            return f"file_type is a short lower-case type name: it is never {const!r}; write {spelled!r}"
        if const not in NAMED_TYPES and const != UNKNOWN_TYPE:  # a declared name outside them reads unknown
            return (f"file_type is never {const!r}: the gateway types an attachment as one of the type names it "
                    f"knows (schemas/config/attachments.py, NAMED_TYPES) or {UNKNOWN_TYPE!r}")
        return None
    words = WORDS.get(label)
    if words is None or const in words:
        return None
    so = {"==": f", so == {const!r} never holds", "!=": f", so != {const!r} always holds"}.get(op, "")
    hint = f"; write {const.casefold()!r}" if const.casefold() in words else ""
    return f"{label} is one of {', '.join(words)}: it is never {const!r}{so}{hint}"


def out_of_domain(label: str | None, op: str, const: Any) -> str | None:
    """Why comparing the feature ``label`` with the literal ``const`` by ``op`` is a mistake; None when it is not.

    ``op``: ``== != < <= > >=``, with the feature on the left, or ``in``/``not in`` for one list item.
    An equality with a number outside the domain never (``==``, ``in``) or always (``!=``, ``not in``)
    holds. An ordering is reported when it never holds, or always holds with a literal outside the
    domain, except the bound just past either end (``request_time.hour < 24``, ``> -1``).
    """
    if isinstance(const, str) and label is not None and op in _EQUALITY:
        return _word(label, op, const)
    domain = DOMAINS.get(label or "")
    if domain is None or isinstance(const, bool) or not isinstance(const, int | float):
        return None
    if op in _EQUALITY:
        if domain.holds(const):
            return None
        so = {"==": f", so == {const!r} never holds", "!=": f", so != {const!r} always holds"}.get(op, "")
        return f"{label} is {domain}: it is never {const!r}{so}"
    test = OPS[op]
    values = range(domain.low, domain.high + 1)
    if not any(test(v, const) for v in values):
        return f"{label} {op} {const!r} never holds: {label} is {domain}"
    if all(test(v, const) for v in values) and not domain.low - 1 <= const <= domain.high + 1:
        return f"{label} {op} {const!r} always holds: {label} is {domain}"
    return None
