"""What a condition can read: the features of :class:`RequestView` and the functions over it.

Each feature has a type the compiler checks comparisons against, and a getter built once. The
prompt is never a feature: only ``prompt_contains('…')`` and the term-list functions read it, and
they return a boolean.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal

from router_core.rules.request import RequestView

__all__ = ["FEATURES", "Getter", "Type", "Value", "fold", "header_getter", "metadata_getter", "prompt_matcher"]

Type = Literal["num", "str", "bool", "null", "any"]
Getter = Callable[[RequestView], Any]

# Headers whose values never appear in an explanation (they carry credentials).
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})


@dataclass(frozen=True, slots=True)
class Value:
    """A typed operand: a feature (``get`` reads it) or a literal (``const``).

    Attributes:
        type: What it holds (``any``: a metadata value, checked only when the request runs).
        nullable: Whether it can be None for some request.
        get: The getter (None for a literal).
        const: The literal's value.
        label: How an explanation names what was read (None: a literal, or not shown).
        secret: The value is read but never shown (a credential header).
    """

    type: Type
    nullable: bool = False
    get: Getter | None = None
    const: Any = None
    label: str | None = None
    secret: bool = False


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

        return Value("any", True, get_one, label="metadata." + key)
    path = tuple(keys)

    def get_path(req: RequestView) -> Any:
        value: Any = req.metadata
        for k in path:
            if not isinstance(value, Mapping):
                return None
            value = value.get(k)
        return value

    return Value("any", True, get_path, label="metadata." + ".".join(path))


def header_getter(name: str) -> Value:
    """Return the request header ``name`` (matched case-insensitively; None if absent)."""
    key = name.lower()

    def get(req: RequestView) -> str | None:
        return req.headers.get(key)

    return Value("str", True, get, label=f"header('{key}')", secret=key in _SECRET_HEADERS)


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
