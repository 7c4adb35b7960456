"""Numbers a valid trace may carry that no store can hold, refused at intake with the field they are in.

The contract's integers are Python integers and its floats take ``inf`` and ``nan`` (pydantic reads
the strings ``"inf"``, ``"nan"``, ``"1e400"`` as such). The stores hold neither: DuckDB's columns
and Elasticsearch's ``long`` are 64-bit integers (every integer of the contract is one:
:mod:`schemas.derive`), and JSON has no infinity, so a non-finite float would be written as
``null`` (a value silently lost, or a trace that no longer reads back). Such a trace used to be
taken at intake and refused later by the sink, without the line it came from. Here it is
refused on its line, like any other invalid record.

The walk over a trace costs a hundred µs or more, so it runs only when the record's bytes hold
something that could become such a number: 19 digits in a row (2**63 has 19; pydantic refuses a
float that large for an integer field), or a string holding only ``inf``, ``infinity`` or ``nan``
(any case, sign, blanks) or a number with an exponent of three digits or more (``"1e400"``). The
test runs on the bytes mapped to a few classes (one ``bytes.translate``) with substring searches:
about 15 µs for a 4 kB trace on a small shared VM, a tenth of what its validation takes there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

__all__ = ["INT64_MAX", "INT64_MIN", "beyond_store"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _classes() -> bytes:
    r"""A translation table mapping each byte to its class, for the substring searches.

    Digits become ``0``; the letters of ``inf``, ``infinity``, ``nan`` and ``e`` stay, lower-cased;
    blanks, ``-`` and ``\`` (escapes) become a space; ``"`` and ``.`` stay; the rest is ``x``.
    """
    table = bytearray(b"x" * 256)
    for chars, to in ((b"0123456789", b"0"), (b" \t\r\n\\-", b" "), (b'"', b'"'), (b".", b".")):
        for c in chars:
            table[c] = to[0]
    for c in b"einfaty":
        table[c] = table[c - 32] = c
    return bytes(table)


_CLASSES = _classes()
_RUN = b"0" * 19
_BLANK = rb"(?: | [tnxf]0*)*"  # blanks, minus signs and escaped blanks (\t, \n, \u0020...) around a number
_WORD = re.compile(rb'"' + _BLANK + rb"(?:inf(?:inity)?|nan)" + _BLANK + rb'"')
_NUMBER_CHARS = frozenset(b"0. ")


def _big_exponent_string(t: bytes) -> bool:
    """A string in ``t`` (classes) that is only a number with an exponent of 3 digits or more (``"1.5e400"``)."""
    at = t.find(b"e000")
    while at != -1:
        start = at
        while start > 0 and t[start - 1] in _NUMBER_CHARS:
            start -= 1
        if start < at and start > 0 and t[start - 1] == 0x22:  # '"': the string starts with the number
            return True
        at = t.find(b"e000", at + 1)
    return False


def _suspect(raw: bytes) -> bool:
    """Whether ``raw`` could hold a number no store holds (a false positive costs a walk)."""
    t = raw.translate(_CLASSES, b"+")  # signs deleted: "1e+400" reads "1e400", "+inf" "inf"
    words = b"inf" in t or b"nan" in t
    return _RUN in t or (words and _WORD.search(t) is not None) or _big_exponent_string(t)


def _leaves(value: Any, path: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path, value


def _problem(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return f"Input should be an integer from {INT64_MIN} to {INT64_MAX} (the store's 64-bit columns)"
    if isinstance(value, float) and not math.isfinite(value):
        return "Input should be a finite number (the store holds no infinity or NaN)"
    return None


def beyond_store(record: BaseModel, raw: bytes) -> str | None:
    """``loc: message`` for the first number in ``record`` that no store can hold; None when there is none.

    Args:
        record: The validated record.
        raw: The bytes it was read from: the walk runs only when they could hold such a number.
            The message names the field, never the value.
    """
    if not _suspect(raw):
        return None
    for path, value in _leaves(record.model_dump(), ()):
        problem = _problem(value)
        if problem is not None:
            return f"{'.'.join(map(str, path)) or '<record>'}: {problem}"
    return None
