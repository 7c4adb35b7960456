"""What a condition can read: the features of :class:`RequestView` and the functions over it.

Each feature has a type the compiler checks comparisons against, a getter built once, and how an
explanation may show what it read (:mod:`.disclose`): the router's own features as read, a
header or metadata value only when the condition names it, a credential never. The prompt is
never a feature: only ``prompt_contains('…')`` and the term-list functions read it, and they
return a boolean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any, Literal

from router_core.rules.condition.disclose import Exposure, disclose, is_secret_name
from router_core.rules.request import RequestView

__all__ = ["FEATURES", "Getter", "Type", "Value", "fold", "header_getter", "metadata_getter", "prompt_matcher"]

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
    types = req.file_types  # the property, inlined: this runs once per rule tried
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


def prompt_matcher(needles: Sequence[str]) -> Callable[[RequestView], bool]:
    """Return whether the prompt contains any of ``needles``, case-insensitively (folded once here)."""
    folded = tuple(dict.fromkeys(n.casefold() for n in needles if n.strip()))
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
