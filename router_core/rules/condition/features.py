"""What a condition can read: the features of :class:`RequestView` and the functions over it.

Each feature has a type the compiler checks comparisons against, a getter built once, and how an
explanation may show what it read (:mod:`.disclose`): the router's own features as read, a
header or metadata value only when the condition names it, a credential never. The prompt is
never a feature: only ``prompt_contains('…')`` and the term-list functions read it, and they
return a boolean.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, Literal

from router_core.rules.condition.disclose import Exposure, disclose, is_secret_name
from router_core.rules.request import RequestView

__all__ = ["FEATURES", "NUMBER", "Getter", "Type", "Value", "fold", "header_getter", "metadata_getter",
           "prompt_matcher"]

Type = Literal["num", "str", "bool", "null", "any"]
Getter = Callable[[RequestView], Any]


@dataclass(frozen=True, slots=True)
class Value:
    """A typed operand: a feature (``get`` reads it) or a literal (``const``).

    Attributes:
        type: What it holds (``any``: a metadata value, checked only when the request runs).
        nullable: Whether it can be None for some request.
        get: The getter (None for a literal).
        const: The literal's value.
        label: How an explanation names what was read (None: a literal, or not shown).
        exposure: How an explanation shows what was read: as read (``shown``), only when it is
            one of ``named`` (``named``: a header or metadata value), or never (``secret``).
        named: The literals its condition compares it against (set when the condition compiles).
    """

    type: Type
    nullable: bool = False
    get: Getter | None = None
    const: Any = None
    label: str | None = None
    exposure: Exposure = "shown"
    named: frozenset[Any] = frozenset()

    def shown(self, value: Any, key: bytes | None = None) -> str:
        """How an explanation shows ``value``, read from this feature (:func:`.disclose.disclose`, keyed by ``key``)."""
        return disclose(value, self.exposure, self.named, key)

    def naming(self, named: Mapping[str, frozenset[Any]]) -> Value:
        """This feature, showing the values ``named`` lists for its label (a header or metadata value)."""
        if self.exposure != "named" or self.label is None:
            return self
        return replace(self, named=named.get(self.label, frozenset()))


def _weekday(req: RequestView) -> int:
    return req.request_time.weekday()


def _file_type(req: RequestView) -> str | None:
    types = req.file_types  # runs once per rule tried
    return types[0] if types else None


def _feature(name: str, type_: Type, nullable: bool = False, get: Getter | None = None) -> Value:
    return Value(type_, nullable, get or attrgetter(name), label=name)


FEATURES: Mapping[str, Value] = {
    "input_length": _feature("input_length", "num"),
    "query_length": _feature("query_length", "num"),
    "language": _feature("language", "str"),
    "intent": _feature("intent", "str", nullable=True),
    "intent_confidence": _feature("intent_confidence", "num", nullable=True),
    "file_type": _feature("file_type", "str", nullable=True, get=_file_type),
    "has_attachments": _feature("has_attachments", "bool"),
    "keyword_score": _feature("keyword_score", "num", nullable=True),
    "request_time.hour": _feature("request_time.hour", "num"),
    "request_time.weekday": _feature("request_time.weekday", "num", get=_weekday),
}


def metadata_getter(keys: Sequence[str]) -> Value:
    """Return the value at the dotted path ``keys`` of the request's ``metadata`` (None if absent)."""
    if len(keys) == 1:
        key = keys[0]

        def get_one(req: RequestView) -> Any:
            return req.metadata.get(key)

        return _metadata(get_one, key)
    path = tuple(keys)

    def get_path(req: RequestView) -> Any:
        value: Any = req.metadata
        for k in path:
            if not isinstance(value, Mapping):
                return None
            value = value.get(k)
        return value

    return _metadata(get_path, ".".join(path))


def _metadata(get: Getter, path: str) -> Value:
    """A metadata value: the caller's own, shown only when named; never when its key looks like a credential's."""
    return Value("any", True, get, label="metadata." + path, exposure="secret" if is_secret_name(path) else "named")


def header_getter(name: str) -> Value:
    """Return the request header ``name`` (matched case-insensitively; None if absent)."""
    key = name.lower()

    def get(req: RequestView) -> str | None:
        return req.headers.get(key)

    return Value("str", True, get, label=f"header('{key}')", exposure="secret" if is_secret_name(key) else "named")


def fold(text: str) -> str:
    """Return ``text.casefold()`` (how every needle and prompt is compared)."""
    return text.casefold()


NUMBER = "{n}"
# Arabic (any Unicode decimal digit: full-width too) or Chinese numerals, daxie included (壹贰叁...,
# as contracts write them); spaces around the number are optional: 第12章, 第 12 章, 第十二章.
_NUMERAL = r"\s*[\d零〇一二两三四五六七八九十百千万壹贰叁肆伍陆柒捌玖拾佰仟]+\s*"


def _numbered(needle: str) -> tuple[tuple[str, ...], re.Pattern[str]]:
    """A needle with ``{n}``: its literal pieces (each must be in the prompt) and the pattern they gate."""
    pieces = needle.split(NUMBER)
    last = len(pieces) - 1
    pieces = [p.lstrip() if i else p for i, p in enumerate(pieces)]  # the spaces at {n} are \s*
    pieces = [p.rstrip() if i < last else p for i, p in enumerate(pieces)]
    return tuple(p for p in pieces if p), re.compile(_NUMERAL.join(re.escape(p) for p in pieces))


def prompt_matcher(needles: Sequence[str]) -> Callable[[RequestView], bool]:
    """Return whether the prompt contains any of ``needles``, case-insensitively (folded once here).

    ``{n}`` in a needle stands for a number (:data:`NUMBER`): ``第{n}章`` is a chapter of any
    number. Such a needle is tried only when its literal pieces are all in the prompt, so a prompt
    without them pays a substring test or two, as for a plain needle.
    """
    folded = tuple(dict.fromkeys(n.casefold() for n in needles if n.strip()))
    numbered = tuple(_numbered(n) for n in folded if NUMBER in n)
    if numbered:
        return _any_of(tuple(n for n in folded if NUMBER not in n), numbered)
    if not folded:
        return lambda req: False
    if len(folded) == 1:
        needle = folded[0]
        return lambda req: needle in req.folded_prompt()

    def match_any(req: RequestView) -> bool:
        prompt = req.folded_prompt()
        for needle in folded:  # a plain loop: any() over a generator costs a microsecond more
            if needle in prompt:
                return True
        return False

    return match_any


def _any_of(plain: tuple[str, ...], numbered: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...],
            ) -> Callable[[RequestView], bool]:
    """The matcher of needles some of which hold ``{n}``: the plain ones first, then the numbered."""

    def match_any(req: RequestView) -> bool:
        prompt = req.folded_prompt()
        for needle in plain:
            if needle in prompt:
                return True
        for pieces, pattern in numbered:
            for piece in pieces:
                if piece not in prompt:
                    break
            else:
                if pattern.search(prompt) is not None:
                    return True
        return False

    return match_any
